"""Rules: the Rule base class, what a rule reports, the registry that loads ``rules/``, and the
run of the enabled rules on one context (:mod:`gpuadvise.rules.context`).

A rule is one module in ``rules/`` holding one :class:`Rule` subclass (DESIGN.md, "A rule"):

- ``id`` (``GA`` + three digits: 1xx launch/occupancy, 2xx shared memory, 3xx global memory/L2,
  4xx registers/arithmetic, 5xx host/launch overhead), a kebab-case ``name`` that names the
  problem, a ``title``, a default ``severity``;
- a docstring with the fixed headings of :data:`DOC_HEADINGS`, each on a line of its own
  (optionally underlined with ``-``), in that order, none empty;
- ``models``: what it reads from the :class:`RuleContext` (:data:`MODELS`); the pipeline computes
  the trace-based models (``trace``, ``banks``, ``coalescing``, ``l2``) only when an enabled rule
  declares them, once, before the rules run (``gpuadvise.analyze.models``);
- ``options`` with defaults (bool, int, float or str), overridable from the configuration;
- ``detect(ctx)`` yields :class:`Finding` s; ``estimate(ctx, finding)`` returns an
  :class:`Estimate` (or None); ``transform(ctx, finding)`` returns a :class:`Variant` (or None).

The registry (:func:`load_registry`) loads the bundled rules (``rules/`` in a source checkout,
``gpuadvise/_rules`` in an installed wheel) and any ``--rules-dir``, and validates every rule at
load time: unique ids and names, complete documentation, options of plain types, known models, and
a case in ``kernels/`` (a ``.cu`` file carrying ``// expect: GAxxx``). A broken rule raises
:class:`RuleLoadError` naming the file and every problem; nothing is half-loaded.

At run time (:func:`evaluate_rules`) a rule that raises becomes one error row (a :class:`Finding`
with ``error`` set) and the other rules go on; a rule whose model cannot be computed (the emulator
cannot run this kernel, no source for the kernel) is skipped with a note.

Findings never claim a measured number: ``measured_speedup`` stays None until the GPU measurement
(wired by the pipeline) fills it. :func:`rank_findings` orders findings by measured speedup, else
by estimate, and each finding says which (``rank_basis``).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import inspect
import logging
import os
import re
import sys
import time
import traceback
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from gpuadvise.errors import ConfigError, GpuAdviseError, UsageError
from gpuadvise.markers import EXPECT_RE
from gpuadvise.rules.context import TRACE_MODELS, ModelUnavailable, RuleContext, Severity
from gpuadvise.rules.suppress import suppress
from gpuadvise.source.edit import unified_diff

if TYPE_CHECKING:
    from gpuadvise.items import ReportItem, ReportRule
    from gpuadvise.report_types import RuleDoc
    from gpuadvise.rules.config import Config

log = logging.getLogger(__name__)

__all__ = [
    "DOC_HEADINGS",
    "MODELS",
    "SAFETY_CLASSES",
    "SEVERITIES",
    "Estimate",
    "Evidence",
    "Finding",
    "FindingDetails",
    "Measurement",
    "ModelUnavailable",
    "Proxy",
    "Registry",
    "Rule",
    "RuleContext",
    "RuleLoadError",
    "RulesRun",
    "SkippedRule",
    "TRACE_MODELS",
    "Trial",
    "Variant",
    "builtin_kernels_dir",
    "builtin_rules_dir",
    "evaluate_rules",
    "expectations",
    "explains",
    "incomplete_line",
    "load_registry",
    "models_needed",
    "models_of",
    "rank_findings",
    "skip_all",
    "skipped_notes",
    "unified_diff",
]

Safety = Literal["automatic-and-verified", "proxy", "display-only"]
EstimateKind = Literal["point", "upper-bound", "none"]
RankBasis = Literal["measured", "estimated", "none"]
MeasurementKind = Literal["variant", "proxy"]

SEVERITIES: tuple[str, ...] = ("error", "warning", "note")
SAFETY_CLASSES: tuple[str, ...] = ("automatic-and-verified", "proxy", "display-only")
DOC_HEADINGS: tuple[str, ...] = (
    "What it detects",
    "Why it is slow",
    "Example",
    "Fix",
    "How the estimate is made",
    "Fix safety",
)
MODELS: dict[str, str] = {
    "occupancy": "theoretical occupancy, its limiters and next steps (no GPU, no trace)",
    "waves": "CTAs per wave, waves and the last wave's fill (needs the device's SM count)",
    "sass": "SASS memory instructions per source line",
    "registers": "live registers along the SASS, the peak and the values that hold it (nvdisasm)",
    "source": "the kernel's source text (pattern rules)",
    "trace": "the warp-level access trace of sampled CTAs (CPU emulator or GPU tracer)",
    "banks": "the shared-memory bank model over the trace",
    "coalescing": "the global-memory sector model over the trace",
    "l2": "the L2 footprint model under the CTA launch orders (over the trace)",
}
OPTION_TYPES = (bool, int, float, str)

ID_RE = re.compile(r"^GA[1-9]\d\d$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)+$")


# ---------------------------------------------------------------------------------------------
# What a rule reports


def _num(value: Any) -> Any:
    """JSON-safe numbers: non-finite floats become None."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    return value


@dataclass(frozen=True)
class Evidence:
    """One number behind a finding: ``metric`` is ``value``; the rule fires past ``threshold``.

    ``op`` says how the value compares with the threshold when the rule fires (``<``, ``<=``,
    ``>``, ``>=``, ``!=``; empty for context-only numbers), ``unit`` what it counts.
    """

    metric: str
    value: float | int | str | None
    threshold: float | int | str | None = None
    op: str = ""
    unit: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "value": _num(self.value),
            "threshold": _num(self.threshold),
            "op": self.op,
            "unit": self.unit,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Evidence:
        return cls(d["metric"], d["value"], d.get("threshold"), d.get("op", ""), d.get("unit", ""))


@dataclass(frozen=True)
class Estimate:
    """An estimated speedup (time before / time after) and how it was computed.

    ``kind``: ``point`` (a model's prediction), ``upper-bound`` (at most this much; the real gain
    is usually smaller) or ``none`` (no number can be given honestly; ``method`` says why).
    ``inputs`` holds the numbers the computation used.
    """

    speedup: float | None
    kind: EstimateKind
    method: str
    inputs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("point", "upper-bound", "none"):
            raise ValueError(f"Estimate.kind must be point, upper-bound or none, not {self.kind!r}")
        if (self.speedup is None) != (self.kind == "none"):
            raise ValueError("an Estimate has a speedup exactly when its kind is not 'none'")

    def label(self) -> str:
        if self.speedup is None:
            return "no estimate"
        prefix = "≤ " if self.kind == "upper-bound" else "~"
        return f"{prefix}{self.speedup:.2f}x (estimated{', upper bound' if prefix == '≤ ' else ''})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "speedup": _num(self.speedup),
            "kind": self.kind,
            "method": self.method,
            "inputs": {k: _num(v) for k, v in self.inputs.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Estimate:
        return cls(d["speedup"], d["kind"], d["method"], dict(d.get("inputs", {})))


@dataclass(frozen=True)
class Measurement:
    """A speedup measured on a GPU: the baseline and the variant, timed and verified.

    Filled only by the measurement stage; a finding never carries one it did not measure.
    ``kind``: ``variant`` (the user's kernel against the finding's variant of it) or ``proxy``
    (two kernels gpuadvise synthesized to reproduce the access pattern in the old and the new
    layout: the effect of the change, not the user's kernel; reports label it). ``label``: which
    of the finding's variants this is (``N=16``), when it has several. ``samples``: the timed
    samples of each kernel; ``stop_reason``: why the adaptive timing stopped there
    (``runner.stats.STOP_REASONS``: ``faster``, ``eliminated``, ``max-time``, ...).
    """

    speedup: float
    baseline_ms: float
    variant_ms: float
    device: str
    ci_low: float | None = None
    ci_high: float | None = None
    outputs_match: bool | None = None
    samples: int | None = None
    kind: MeasurementKind = "variant"
    label: str | None = None
    stop_reason: str | None = None
    kernel_ms: float | None = None  # a proxy's: the user's kernel timed in the same stage

    @property
    def proxy_off(self) -> float | None:
        """For a proxy timed beside the kernel it stands for: how far the proxy's baseline is
        from the kernel's own time (``baseline / kernel - 1``); None otherwise."""
        if self.kind != "proxy" or not self.kernel_ms or self.kernel_ms <= 0:
            return None
        return self.baseline_ms / self.kernel_ms - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "speedup": _num(self.speedup),
            "baseline_ms": _num(self.baseline_ms),
            "variant_ms": _num(self.variant_ms),
            "device": self.device,
            "ci_low": _num(self.ci_low),
            "ci_high": _num(self.ci_high),
            "outputs_match": self.outputs_match,
            "samples": self.samples,
            "kind": self.kind,
            "label": self.label,
            "stop_reason": self.stop_reason,
            "kernel_ms": _num(self.kernel_ms),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Measurement:
        return cls(
            d["speedup"],
            d["baseline_ms"],
            d["variant_ms"],
            d["device"],
            d.get("ci_low"),
            d.get("ci_high"),
            d.get("outputs_match"),
            d.get("samples"),
            d.get("kind", "variant"),
            d.get("label"),
            d.get("stop_reason"),
            d.get("kernel_ms"),
        )


@dataclass(frozen=True)
class Proxy:
    """Two kernels gpuadvise synthesized to measure a change it cannot apply to the user's kernel
    (a data-layout change reaches into the host code that allocates the data).

    ``source``: one CUDA file holding both kernels, ``before`` (the access pattern as the user's
    kernel has it) and ``after`` (the same work in the new layout), with the same bytes and the
    same grid. ``spec_before``/``spec_after``: the launch specs (``case.toml`` text, ``source =
    "proxy.cu"``) of each. Both must write the same output buffers, and the same values when each
    reads the words it was built to read (an ``iota`` fill lets a kernel turn the value it loads
    back into the logical element and field), so that the measurement stage verifies them like
    any variant.
    """

    source: str
    before: str
    after: str
    spec_before: str
    spec_after: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "before": self.before,
            "after": self.after,
            "spec_before": self.spec_before,
            "spec_after": self.spec_after,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Proxy:
        return cls(d["source"], d["before"], d["after"], d["spec_before"], d["spec_after"])


@dataclass(frozen=True)
class Variant:
    """A change that should remove the problem, with its safety class.

    ``safety``: ``automatic-and-verified`` (the pipeline builds it, runs it and checks its outputs
    against the baseline before it reports a speedup), ``proxy`` (a synthesized kernel reproducing
    the access pattern: measures the effect, not the user's kernel; ``proxy`` holds the two
    kernels) or ``display-only`` (shown to the user, never run). ``diff``: a unified diff of the
    source (source transforms); ``nvcc_flags``/``defines``: compile-time changes; ``launch``: a
    launch change (``{"grid": [x, y, z], "block": [...], "dynamic_smem_bytes": n}``, any subset).
    ``label``: a short name when a rule offers several (``N=16``); ``alternatives``: the other
    candidates the measurement stage tries (GA304's tile sizes): it keeps the fastest verified
    one as the finding's variant and lists every result.
    ``totals``: outputs that hold one partial result per CTA (a per-block reduction's
    ``out[blockIdx.x]``) and whose count changes with the variant's grid: output name -> the
    combine op (``+``, ``max``, ``min``). Verification compares the combined total of the first
    ``gridDim.x`` elements each launch writes (:func:`gpuadvise.runner.verify.compare_totals`)
    instead of element by element; the host must then combine ``gridDim.x`` partials.
    ``launch_specific``: the change writes something of this launch into the kernel (GA206's
    original grid as a constant, where no kernel parameter gives it): right for this launch
    only. Its description says so, ``--fix`` applies it only with ``--unsafe-fixes``.
    """

    safety: Safety
    description: str
    diff: str | None = None
    nvcc_flags: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    launch: Mapping[str, Any] | None = None
    label: str | None = None
    alternatives: tuple[Variant, ...] = ()
    proxy: Proxy | None = None
    totals: Mapping[str, str] | None = None
    launch_specific: bool = False

    def __post_init__(self) -> None:
        if self.safety not in SAFETY_CLASSES:
            raise ValueError(f"Variant.safety must be one of {SAFETY_CLASSES}, not {self.safety!r}")
        if (self.proxy is not None) != (self.safety == "proxy"):
            raise ValueError("a Variant has a proxy exactly when its safety is 'proxy'")

    def candidates(self) -> tuple[Variant, ...]:
        """This variant and its alternatives, each without alternatives of its own."""
        return (
            replace(self, alternatives=()),
            *(replace(a, alternatives=()) for a in self.alternatives),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "safety": self.safety,
            "description": self.description,
            "label": self.label,
            "diff": self.diff,
            "nvcc_flags": list(self.nvcc_flags),
            "defines": list(self.defines),
            "launch": None if self.launch is None else dict(self.launch),
            "proxy": None if self.proxy is None else self.proxy.to_dict(),
            "alternatives": [a.to_dict() for a in self.alternatives],
            "totals": None if self.totals is None else dict(self.totals),
            "launch_specific": self.launch_specific,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Variant:
        px = d.get("proxy")
        return cls(
            d["safety"],
            d["description"],
            d.get("diff"),
            tuple(d.get("nvcc_flags", ())),
            tuple(d.get("defines", ())),
            d.get("launch"),
            d.get("label"),
            tuple(cls.from_dict(a) for a in d.get("alternatives", ())),
            None if px is None else Proxy.from_dict(px),
            d.get("totals"),
            bool(d.get("launch_specific", False)),
        )


@dataclass(frozen=True)
class Trial:
    """One candidate variant the measurement stage tried: its label and what became of it
    (a measurement, or why there is none: failed to build, to run, or to verify)."""

    label: str | None
    description: str
    measurement: Measurement | None = None
    verified: bool | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "description": self.description,
            "measured_speedup": None if self.measurement is None else self.measurement.to_dict(),
            "verified": self.verified,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Trial:
        m = d.get("measured_speedup")
        return cls(
            d.get("label"),
            d.get("description", ""),
            None if m is None else Measurement.from_dict(m),
            d.get("verified"),
            d.get("note"),
        )


# ---------------------------------------------------------------------------------------------
# A rule's details: what detect() hands to estimate()/transform(), typed and serializable

_JSON_SCALARS = (str, int, float, bool, type(None))


def _to_json(value: Any, where: str) -> Any:
    if isinstance(value, FindingDetails):
        return value.to_dict()
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, (tuple, list)):
        return [_to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: a details mapping's keys must be str, not {k!r}")
            out[k] = _to_json(v, f"{where}.{k}")
        return out
    raise TypeError(
        f"{where}: {type(value).__name__} is not JSON-safe (details hold str, int, float, bool, "
        "None, and tuples, lists, dicts or FindingDetails of those)"
    )


def _from_json(hint: Any, value: Any) -> Any:
    """``value`` (parsed JSON) as the type ``hint`` names: lists become tuples where the field
    is a tuple, dicts become the FindingDetails class a field names."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        for a in members:  # the first member the value's JSON shape fits
            o = typing.get_origin(a) or a
            if isinstance(value, list) and o in (tuple, list):
                return _from_json(a, value)
            if isinstance(value, dict) and (
                o in (dict, Mapping) or (isinstance(o, type) and issubclass(o, FindingDetails))
            ):
                return _from_json(a, value)
        return value
    if isinstance(hint, type) and issubclass(hint, FindingDetails) and isinstance(value, dict):
        return hint.from_dict(value)
    if origin is tuple and isinstance(value, list):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_json(args[0], v) for v in value)
        if args and len(args) == len(value):
            return tuple(_from_json(a, v) for a, v in zip(args, value, strict=True))
        return tuple(_from_json(Any, v) for v in value)
    if origin is list and isinstance(value, list):
        (arg,) = typing.get_args(hint) or (Any,)
        return [_from_json(arg, v) for v in value]
    if origin in (dict, Mapping) and isinstance(value, dict):
        args = typing.get_args(hint)
        arg = args[1] if len(args) == 2 else Any
        return {k: _from_json(arg, v) for k, v in value.items()}
    return value


class FindingDetails:
    """Base of a rule's typed details: what its ``detect`` hands to ``estimate``/``transform``.

    A subclass is a frozen dataclass defined at the top level of the rule's module, whose fields
    are JSON-safe: str, int, float (finite), bool, None, and tuples, lists, str-keyed dicts or
    other FindingDetails of those. What cannot be JSON (arrays, the trace view, a model's
    result, the parsed source) is not kept: ``estimate``/``transform`` recompute it from the
    context with the ids, names and lines the details hold. :meth:`to_dict`/:meth:`from_dict`
    follow from the fields; a finding's JSON carries the class's name as ``type``, and
    :meth:`Finding.from_dict` finds the class again in the module of the finding's rule.
    """

    def to_dict(self) -> dict[str, Any]:
        if not is_dataclass(self):
            raise TypeError(f"{type(self).__name__} must be a dataclass")
        return {
            f.name: _to_json(getattr(self, f.name), f"{type(self).__name__}.{f.name}")
            for f in fields(self)
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        hints = typing.get_type_hints(cls)
        return cls(
            **{
                f.name: _from_json(hints.get(f.name, Any), d[f.name])
                for f in fields(cls)  # type: ignore[arg-type]
                if f.name in d
            }
        )


_D = TypeVar("_D", bound=FindingDetails)


def _details_to_dict(details: FindingDetails | Mapping[str, Any] | None) -> Any:
    if details is None:
        return None
    if isinstance(details, FindingDetails):
        return {"type": type(details).__name__, "fields": details.to_dict()}
    return _to_json(details, "details")


def _details_from_dict(rule_id: str, d: Any, registry: Registry | None) -> Any:
    """A finding's details from its JSON: the rule's class named by ``type``, looked up in the
    module of the rule (``registry``'s, the bundled rules by default); an unknown rule or type
    leaves the JSON as it is."""
    if not isinstance(d, Mapping) or set(d) != {"type", "fields"}:
        return d
    if registry is None:
        try:
            registry = load_registry()
        except GpuAdviseError:
            return dict(d)
    rule = registry.find(rule_id)
    module = None
    if rule is not None:
        module = type(rule)._module or sys.modules.get(type(rule).__module__)
    cls = getattr(module, str(d["type"]), None) if module is not None else None
    if not (isinstance(cls, type) and issubclass(cls, FindingDetails)):
        return dict(d)
    return cls.from_dict(d["fields"])


@dataclass(frozen=True)
class Finding:
    """One problem a rule found, where, why (evidence), and what fixing it is worth.

    ``file``/``line``: the source location (the access's line for model rules, the pattern's line
    for source rules, the kernel's declaration line for launch-level rules). ``kernel``: the
    kernel analysed. ``estimated_speedup``: the rule's :class:`Estimate`;
    ``measured_speedup``: a :class:`Measurement` from the GPU, None until one is made;
    ``verified``: whether the variant's outputs matched the baseline's (None: not run).
    ``error``: set on an error row (the rule itself failed; ``message`` says how).
    ``recommend_only_if_faster``: a fix that often does not pay (GA305: the L1 may serve the
    reuse already) is recommended only when measured faster; the measurement stage demotes the
    finding to a note otherwise.
    ``details``: the rule's :class:`FindingDetails` for its ``estimate``/``transform`` (None
    when it needs none); serialized with its class name (a plain dict when the class is unknown).
    """

    rule: str
    name: str
    title: str
    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    kernel: str | None = None
    evidence: tuple[Evidence, ...] = ()
    estimated_speedup: Estimate | None = None
    measured_speedup: Measurement | None = None
    verified: bool | None = None
    variant: Variant | None = None
    error: str | None = None
    trials: tuple[Trial, ...] = ()
    recommend_only_if_faster: bool = False
    details: FindingDetails | Mapping[str, Any] | None = field(default=None, repr=False)

    @property
    def is_error(self) -> bool:
        return self.error is not None

    def details_as(self, cls: type[_D]) -> _D:
        """The details, checked to be of the rule's class ``cls``."""
        if not isinstance(self.details, cls):
            raise TypeError(
                f"{self.rule} finding's details are {type(self.details).__name__}, "
                f"not {cls.__name__}"
            )
        return self.details

    @property
    def rank_basis(self) -> RankBasis:
        if self.measured_speedup is not None:
            return "measured"
        if self.estimated_speedup is not None and self.estimated_speedup.speedup is not None:
            return "estimated"
        return "none"

    @property
    def rank_speedup(self) -> float | None:
        """The number findings are ranked by: measured if measured, else estimated."""
        if self.measured_speedup is not None:
            return self.measured_speedup.speedup
        if self.estimated_speedup is not None:
            return self.estimated_speedup.speedup
        return None

    def speedup_label(self) -> str:
        m = self.measured_speedup
        if m is not None:
            what = "proxy-measured" if m.kind == "proxy" else "measured"
            label = f", {m.label}" if m.label else ""
            return f"{m.speedup:.2f}x ({what} on {m.device}{label})"
        if self.estimated_speedup is not None:
            return self.estimated_speedup.label()
        return "no estimate"

    def location(self) -> str:
        if self.file is None:
            return ""
        return f"{self.file}:{self.line}" if self.line else self.file

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": self.name,
            "title": self.title,
            "kernel": self.kernel,
            "file": self.file,
            "line": self.line,
            "severity": self.severity,
            "message": self.message,
            "evidence": [e.to_dict() for e in self.evidence],
            "estimated_speedup": (
                None if self.estimated_speedup is None else self.estimated_speedup.to_dict()
            ),
            "measured_speedup": (
                None if self.measured_speedup is None else self.measured_speedup.to_dict()
            ),
            "verified": self.verified,
            "variant": None if self.variant is None else self.variant.to_dict(),
            "rank_basis": self.rank_basis,
            "error": self.error,
            "trials": [t.to_dict() for t in self.trials],
            "recommend_only_if_faster": self.recommend_only_if_faster,
            "details": _details_to_dict(self.details),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], registry: Registry | None = None) -> Finding:
        """The finding of :meth:`to_dict`'s JSON; ``registry``: where the rule's details class
        is looked up (the bundled rules by default)."""
        est, meas, var = d.get("estimated_speedup"), d.get("measured_speedup"), d.get("variant")
        return cls(
            rule=d["rule"],
            name=d["name"],
            title=d.get("title", ""),
            severity=d["severity"],
            message=d["message"],
            file=d.get("file"),
            line=d.get("line"),
            kernel=d.get("kernel"),
            evidence=tuple(Evidence.from_dict(e) for e in d.get("evidence", ())),
            estimated_speedup=None if est is None else Estimate.from_dict(est),
            measured_speedup=None if meas is None else Measurement.from_dict(meas),
            verified=d.get("verified"),
            variant=None if var is None else Variant.from_dict(var),
            error=d.get("error"),
            trials=tuple(Trial.from_dict(t) for t in d.get("trials", ())),
            recommend_only_if_faster=bool(d.get("recommend_only_if_faster", False)),
            details=_details_from_dict(d["rule"], d.get("details"), registry),
        )

    def to_report_item(self, root: str | os.PathLike[str] | None = None) -> ReportItem:
        """The shared finding shape of the SARIF/JUnit/GitHub/Markdown writers.

        ``root``: the repository root the file is made relative to (SARIF wants that).
        """
        from gpuadvise.items import ReportItem

        file = self.file
        if file and root is not None:
            try:
                file = os.path.relpath(os.path.abspath(file), os.path.abspath(root))
            except ValueError:  # another drive (Windows)
                pass
            file = file.replace(os.sep, "/")
        props: dict[str, Any] = {
            "rule_name": self.name,
            "rank_basis": self.rank_basis,
            "speedup": self.speedup_label(),
            "evidence": [e.to_dict() for e in self.evidence],
        }
        if self.variant is not None:
            props["variant"] = self.variant.safety
        return ReportItem(
            rule_id=self.rule,
            level=self.severity,
            message=self.message,
            file=file,
            line=self.line,
            title=self.title,
            group=self.kernel,
            outcome="error" if self.is_error else None,
            properties=props,
        )


_SEVERITY_ORDER = {"error": 0, "warning": 1, "note": 2}
_BASIS_ORDER = {"measured": 0, "estimated": 1, "none": 2}
# a fix the tool applies outranks a proxy-measured one, which outranks advice, at equal value
_FIX_ORDER = {"automatic-and-verified": 0, "proxy": 1, "display-only": 2}


def rank_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Findings in report order: measured ones by measured speedup, then estimated ones by their
    estimate, then those with no number; error rows last. Ties: a finding with an automatic fix
    before a proxy-measured one, before advice (a display-only diff), before none; then
    severity, rule id, line. Last, a cause goes right above the symptom it explains
    (:func:`explains`: its fix rewrites the symptom's line, GA202's sequential addressing the
    line of GA201's conflicts), wherever the numbers put it.

    A measured speedup outranks any estimate (an estimate is often an upper bound); each finding's
    ``rank_basis`` says which number placed it.
    """

    def key(f: Finding) -> tuple[Any, ...]:
        return (
            f.is_error,
            _BASIS_ORDER[f.rank_basis],
            -(f.rank_speedup or 0.0),
            _FIX_ORDER.get(f.variant.safety, 3) if f.variant is not None else 3,
            _SEVERITY_ORDER.get(f.severity, 3),
            f.rule,
            f.line or 0,
        )

    return _causes_first(sorted(findings, key=key))


def explains(cause: Finding, symptom: Finding) -> bool:
    """Whether ``cause`` explains ``symptom``: they are at the same file, ``cause``'s fix
    rewrites (removes or replaces) the line ``symptom`` is reported at, and ``symptom``'s own fix
    does not rewrite ``cause``'s line (two fixes of one statement explain each other: neither is
    the cause). Read from the fixes' diffs, not from a table of rule pairs: GA202's sequential
    addressing rewrites the line of GA201's bank conflicts, GA306's shared-tile transpose the
    strided access of GA301."""
    from gpuadvise.source.patch import changed_lines

    if cause.is_error or symptom.is_error or cause.rule == symptom.rule:
        return False
    if cause.variant is None or not cause.variant.diff or symptom.line is None:
        return False
    if cause.file is None or symptom.file is None:
        return False
    if os.path.normpath(cause.file) != os.path.normpath(symptom.file):
        return False
    if symptom.line not in changed_lines(cause.variant.diff):
        return False
    back = symptom.variant.diff if symptom.variant is not None else None
    return not (back and cause.line is not None and cause.line in changed_lines(back))


def _causes_first(ordered: list[Finding]) -> list[Finding]:
    """``ordered`` with every cause moved right above the first symptom it explains that is
    ranked above it (:func:`explains`); the rest keep their order."""
    out = list(ordered)
    for _ in range(len(out) ** 2 + 1):  # each move brings a cause up; a cycle cannot loop
        move = next(
            (
                (i, j)
                for i, c in enumerate(out)
                for j in range(i)
                if explains(c, out[j]) and not explains(out[j], c)
            ),
            None,
        )
        if move is None:
            break
        i, j = move
        out.insert(j, out.pop(i))
    return out


# ---------------------------------------------------------------------------------------------
# The rule


class RuleLoadError(GpuAdviseError):
    """A rule file that cannot be loaded or is incomplete: fails loudly at load time."""


class Rule(ABC):
    """Base class of every rule; see the module docstring and DESIGN.md ("A rule")."""

    id: ClassVar[str] = ""
    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    severity: ClassVar[Severity] = "warning"
    models: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[Mapping[str, bool | int | float | str]] = {}
    origin: ClassVar[Path | None] = None  # the file it was loaded from (set by the registry)
    # the module it was loaded as (set by the registry): where its details classes are found
    # again. Not sys.modules' entry of that name, which a later load of the same file replaces
    # (another registry's), while this registry's rules keep their own classes
    _module: ClassVar[ModuleType | None] = None

    @abstractmethod
    def detect(self, ctx: RuleContext) -> Iterable[Finding]:
        """Yield the findings of this rule (every rule must define it)."""

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate | None:
        return None

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant | None:
        return None

    # helpers for rule authors

    def finding(
        self,
        ctx: RuleContext,
        message: str,
        *,
        line: int | None,
        file: str | None = None,
        evidence: Iterable[Evidence] = (),
        severity: Severity | None = None,
        details: FindingDetails | None = None,
        recommend_only_if_faster: bool = False,
    ) -> Finding:
        """A finding of this rule in ``ctx``'s kernel (file: the kernel's source by default)."""
        return Finding(
            rule=self.id,
            name=self.name,
            title=self.title,
            severity=severity or ctx.severity or self.severity,
            message=message,
            file=file if file is not None else ctx.source_file,
            line=line,
            kernel=ctx.kernel_name,
            evidence=tuple(evidence),
            recommend_only_if_faster=recommend_only_if_faster,
            details=details,
        )

    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def sections(cls) -> dict[str, str]:
        """The docstring's sections by heading ("" holds the text before the first heading)."""
        return doc_sections(cls.doc())

    @classmethod
    def summary(cls) -> str:
        return cls.sections().get("What it detects", "").split("\n\n")[0].replace("\n", " ")

    @classmethod
    def report_rule(cls) -> ReportRule:
        """The SARIF ``tool.driver.rules[]`` entry."""
        from gpuadvise.items import ReportRule

        level: Any = cls.severity
        return ReportRule(
            id=cls.id,
            name="".join(p.capitalize() for p in cls.name.split("-")),
            short_description=cls.title,
            full_description=cls.summary() or cls.title,
            help_text=cls.doc(),
            default_level=level,
            tags=("performance", "gpuadvise", *cls.models),
        )

    def describe(self) -> dict[str, Any]:
        """The rule as ``gpuadvise rules --json`` and ``explain --json`` show it."""
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title,
            "severity": self.severity,
            "models": list(self.models),
            "options": dict(self.options),
            "doc": self.doc(),
            "sections": self.sections(),
            "origin": None if self.origin is None else str(self.origin),
        }


def doc_sections(doc: str) -> dict[str, str]:
    lines = doc.splitlines()
    heads: list[tuple[int, str, int]] = []  # (line index, heading, first body line)
    for i, raw in enumerate(lines):
        text = raw.strip().rstrip(":")
        if text in DOC_HEADINGS:
            body = i + 1
            if body < len(lines) and set(lines[body].strip()) == {"-"}:
                body += 1
            heads.append((i, text, body))
    out: dict[str, str] = {}
    first = heads[0][0] if heads else len(lines)
    out[""] = "\n".join(lines[:first]).strip()
    for k, (_i, name, body) in enumerate(heads):
        end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
        out[name] = "\n".join(lines[body:end]).strip()
    return out


def _edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions, transpositions."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


# ---------------------------------------------------------------------------------------------
# The registry


def _package_dir() -> Path:
    """The ``gpuadvise`` package folder."""
    return Path(__file__).resolve().parents[1]


def builtin_rules_dir() -> Path | None:
    """``gpuadvise/_rules`` in an installed wheel, else ``rules/`` of the source checkout."""
    pkg = _package_dir()
    for cand in (pkg / "_rules", pkg.parent / "rules"):
        if cand.is_dir():
            return cand
    return None


def builtin_kernels_dir() -> Path | None:
    """``gpuadvise/_kernels`` in an installed wheel, else ``kernels/`` of the source checkout."""
    pkg = _package_dir()
    for cand in (pkg / "_kernels", pkg.parent / "kernels"):
        if cand.is_dir():
            return cand
    return None


def expectations(path: str | os.PathLike[str]) -> dict[int, tuple[str, ...]]:
    """``// expect: GA201[, GA202]`` annotations of a source file: line -> rule ids."""
    out: dict[int, tuple[str, ...]] = {}
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    for n, line in enumerate(text.splitlines(), 1):
        m = EXPECT_RE.search(line)
        if m:
            out[n] = tuple(x.strip() for x in m.group(1).split(","))
    return out


def _case_index(dirs: Iterable[Path]) -> dict[str, list[Path]]:
    """Rule id -> the kernel sources (``*.cu``, ``*.cuh``) that expect it."""
    index: dict[str, list[Path]] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.rglob("*")):
            if path.suffix not in (".cu", ".cuh") or not path.is_file():
                continue
            for ids in expectations(path).values():
                for rid in ids:
                    paths = index.setdefault(rid, [])
                    if path not in paths:
                        paths.append(path)
    return index


def _import_rule_file(path: Path) -> ModuleType:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    mod_name = f"gpuadvise_rules_{digest}.{path.stem}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return module


def validate_rule(cls: type[Rule], path: Path | None = None) -> list[str]:
    """Everything wrong with a rule class (empty when it is complete)."""
    problems: list[str] = []
    if not isinstance(cls.id, str) or not ID_RE.match(cls.id):
        problems.append(f"id {cls.id!r} is not GA followed by three digits (GA101 ... GA999)")
    if not isinstance(cls.name, str) or not NAME_RE.match(cls.name):
        problems.append(f"name {cls.name!r} is not kebab-case (two words or more: bank-conflicts)")
    if not isinstance(cls.title, str) or not cls.title.strip():
        problems.append("title is empty")
    if cls.severity not in SEVERITIES:
        problems.append(f"severity {cls.severity!r} is not one of {', '.join(SEVERITIES)}")
    if not isinstance(cls.models, tuple) or any(m not in MODELS for m in cls.models):
        problems.append(f"models {cls.models!r} must be a tuple of: {', '.join(MODELS)}")
    if not isinstance(cls.options, Mapping):
        problems.append("options must be a dict of name -> default")
    else:
        for k, v in cls.options.items():
            if not isinstance(k, str) or not k.isidentifier():
                problems.append(f"option name {k!r} is not an identifier")
            if not isinstance(v, OPTION_TYPES):
                problems.append(f"option {k!r} has a default of type {type(v).__name__}")
    if cls.detect is Rule.detect:
        problems.append("detect(ctx) is not defined")
    for meth in ("detect", "estimate", "transform"):
        fn = getattr(cls, meth, None)
        if not callable(fn):
            problems.append(f"{meth} is not a method")
            continue
        try:
            params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            continue
        want = 2 if meth == "detect" else 3
        if len(params) != want:
            args = "self, ctx" if meth == "detect" else "self, ctx, finding"
            problems.append(f"{meth} must take ({args})")
    doc = cls.doc()
    if not doc:
        problems.append("the class has no docstring")
    else:
        sections = doc_sections(doc)
        missing = [h for h in DOC_HEADINGS if h not in sections]
        if missing:
            problems.append("the docstring lacks the heading(s): " + ", ".join(missing))
        else:
            order = [h for h in sections if h]
            if order != list(DOC_HEADINGS):
                problems.append(
                    "the docstring's headings must come in this order: " + " / ".join(DOC_HEADINGS)
                )
            empty = [h for h in DOC_HEADINGS if not sections[h].strip()]
            if empty:
                problems.append("empty docstring section(s): " + ", ".join(empty))
    if path is not None and isinstance(cls.id, str) and ID_RE.match(cls.id):
        if not path.stem.lower().startswith(cls.id.lower() + "_"):
            problems.append(f"the file name must start with {cls.id.lower()}_ (it is {path.name})")
    return problems


@dataclass(frozen=True)
class Registry:
    """The loaded rules, in id order, and the kernel cases that expect each."""

    rules: tuple[Rule, ...]
    cases: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    dirs: tuple[Path, ...] = ()

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.rules)

    def find(self, key: str) -> Rule | None:
        """A rule by id (any case) or name."""
        k = key.strip()
        for r in self.rules:
            if r.id == k.upper() or r.name == k.lower():
                return r
        return None

    def rule_doc(self, rule: Rule) -> RuleDoc:
        """``rule`` as ``gpuadvise rules`` and ``explain`` print it (the report's RuleDoc)."""
        from gpuadvise.report_types import RuleDoc

        return RuleDoc(
            id=rule.id,
            name=rule.name,
            title=rule.title,
            severity=rule.severity,
            models=tuple((m, MODELS[m]) for m in rule.models),
            options=tuple(rule.options.items()),
            cases=tuple(str(p) for p in self.cases.get(rule.id, ())),
            origin=None if rule.origin is None else str(rule.origin),
            doc=rule.doc(),
        )

    def get(self, key: str) -> Rule:
        """A rule by id or name; an unknown one is a UsageError naming the close matches."""
        r = self.find(key)
        if r is not None:
            return r
        raise UsageError(f"no rule {key!r}", self.suggest(key))

    def suggest(self, key: str) -> str:
        words = [r.id for r in self.rules] + [r.name for r in self.rules]
        close = difflib.get_close_matches(key.strip(), words, n=10, cutoff=0.5)
        close += difflib.get_close_matches(key.strip().upper(), words, n=10, cutoff=0.5)
        close = list(dict.fromkeys(close))
        # a swapped pair of digits (GA210 for GA201) is one edit: those first
        close.sort(key=lambda w: _edits(key.strip().upper(), w.upper()))
        close = close[:3]
        if close:
            return "did you mean " + " or ".join(close) + "? (`gpuadvise rules` lists them)"
        return "`gpuadvise rules` lists them"

    # selection (ruff-like prefixes)

    def matching(self, selector: str) -> list[Rule]:
        """Rules a selector names: ``ALL``, an id prefix (``GA2`` -> GA2xx) or a rule name."""
        s = selector.strip()
        if s.upper() == "ALL":
            return list(self.rules)
        if s.upper().startswith("GA"):
            return [r for r in self.rules if r.id.startswith(s.upper())]
        return [r for r in self.rules if r.name == s.lower()]

    def _specificity(self, rule: Rule, selectors: Sequence[str]) -> int:
        """How specifically ``selectors`` name ``rule``: -1 not at all, 0 ALL, else prefix
        length (a name counts as a full id)."""
        best = -1
        for s in selectors:
            t = s.strip()
            if t.upper() == "ALL":
                best = max(best, 0)
            elif t.upper().startswith("GA") and rule.id.startswith(t.upper()):
                best = max(best, len(t))
            elif t.lower() == rule.name:
                best = max(best, len(rule.id))
        return best

    def check_selectors(self, selectors: Iterable[str], what: str) -> None:
        for s in selectors:
            if not self.matching(s):
                raise UsageError(f"{what} {s!r} matches no rule", self.suggest(s))

    def selected(self, config: Config | None) -> list[Rule]:
        """The enabled rules: the configuration's ``select``/``ignore`` (every rule when it has
        no ``select``), then the command line's. Within one layer the more specific selector wins
        (``select = ["GA2"]``, ``ignore = ["GA201"]``: GA2xx but GA201; at equal specificity
        ignore wins); a layer with a ``select`` starts afresh, as ruff does."""
        if config is None:
            return list(self.rules)
        enabled = {r.id: True for r in self.rules}
        layers = [(config.select, config.ignore, "select/ignore in " + str(config.path or ""))]
        layers.append((config.cli_select, config.cli_ignore, "--select/--ignore"))
        for select, ignore, what in layers:
            self.check_selectors(select or (), what)
            self.check_selectors(ignore, what)
            for r in self.rules:
                sel = self._specificity(r, select) if select is not None else -1
                ign = self._specificity(r, ignore)
                if select is not None and sel < 0 and ign < 0:
                    enabled[r.id] = False
                elif sel > ign:
                    enabled[r.id] = True
                elif ign >= 0 and ign >= sel:
                    enabled[r.id] = False
        return [r for r in self.rules if enabled[r.id]]

    def options_for(self, rule: Rule, config: Config | None) -> dict[str, Any]:
        """The rule's defaults overridden by the configuration (types checked)."""
        opts = dict(rule.options)
        if config is None:
            return opts
        for key, table in config.rule_options.items():
            if self.find(key) is not rule:
                continue
            for name, value in table.items():
                if name == "severity":
                    continue
                opt = name.replace("-", "_")
                if opt not in opts:
                    known = ", ".join(sorted(rule.options)) or "none"
                    raise ConfigError(
                        f"{rule.id} ({rule.name}) has no option {name!r} "
                        f"(in {config.path or 'the configuration'})",
                        f"its options: {known}",
                    )
                opts[opt] = _coerce_option(rule, opt, value, config.path)
        return opts

    def severity_for(self, rule: Rule, config: Config | None) -> Severity | None:
        if config is None:
            return None
        for key, table in config.rule_options.items():
            if self.find(key) is rule and "severity" in table:
                sev = table["severity"]
                if sev not in SEVERITIES:
                    raise ConfigError(
                        f"severity {sev!r} for {rule.id} is not one of {', '.join(SEVERITIES)}",
                        f'write severity = "{SEVERITIES[1]}" (or another of those)',
                    )
                return sev  # type: ignore[no-any-return]
        return None

    def check_config(self, config: Config) -> None:
        """Every rule named in the configuration's per-rule tables exists, with those options."""
        for key in config.rule_options:
            rule = self.find(key)
            if rule is None:
                raise ConfigError(
                    f"[rules.{key}] in {config.path or 'the configuration'} names no rule",
                    self.suggest(key),
                )
            self.options_for(rule, config)
            self.severity_for(rule, config)


def _coerce_option(rule: Rule, name: str, value: Any, where: Path | None) -> Any:
    default = rule.options[name]
    ok = (
        isinstance(value, type(default))
        if not isinstance(default, float)
        else isinstance(value, int | float) and not isinstance(value, bool)
    )
    if isinstance(default, int) and not isinstance(default, bool) and isinstance(value, bool):
        ok = False
    if not ok:
        raise ConfigError(
            f"option {name} of {rule.id} must be {type(default).__name__} "
            f"(got {value!r} in {where or 'the configuration'})",
            f"the default is {default!r}",
        )
    return float(value) if isinstance(default, float) else value


_REGISTRY_CACHE: dict[tuple[str, ...], Registry] = {}


def load_registry(
    extra_dirs: Iterable[str | os.PathLike[str]] = (),
    *,
    builtin: bool = True,
    kernels_dirs: Iterable[str | os.PathLike[str]] = (),
) -> Registry:
    """Load and validate the rules: the bundled ones (``builtin``) and those in ``extra_dirs``.

    Kernel cases are looked for in the bundled ``kernels/``, in ``kernels_dirs``, and in
    ``kernels/`` inside or beside each extra rules directory. Raises :class:`RuleLoadError`
    listing every problem of every broken rule file. Cached per set of directories.
    """
    dirs: list[Path] = []
    if builtin:
        b = builtin_rules_dir()
        if b is None:
            raise RuleLoadError(
                "the bundled rules are missing (no rules/ beside gpuadvise/ nor gpuadvise/_rules)",
                "reinstall gpuadvise",
            )
        dirs.append(b)
    for d in extra_dirs:
        p = Path(d).expanduser().resolve()
        if not p.is_dir():
            raise RuleLoadError(f"rules directory {d} does not exist", "check --rules-dir")
        if p not in dirs:
            dirs.append(p)
    kdirs: list[Path] = []
    bk = builtin_kernels_dir()
    if builtin and bk is not None:
        kdirs.append(bk)
    kdirs += [Path(k).expanduser().resolve() for k in kernels_dirs]
    for d in dirs[1:] if builtin else dirs:
        kdirs += [d / "kernels", d.parent / "kernels"]
    key = tuple(str(p) for p in (*dirs, Path("|"), *kdirs))
    cached = _REGISTRY_CACHE.get(key)
    if cached is not None:
        return cached

    problems: list[str] = []
    found: list[Rule] = []
    for d in dirs:
        for path in sorted(d.glob("*.py")):
            if path.name.startswith("_"):
                continue
            try:
                module = _import_rule_file(path)
            except Exception as exc:
                tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
                problems.append(f"{path}: cannot be imported: {tb}")
                continue
            classes = [
                v
                for v in vars(module).values()
                if isinstance(v, type)
                and issubclass(v, Rule)
                and v is not Rule
                and v.__module__ == module.__name__
            ]
            if len(classes) != 1:
                problems.append(
                    f"{path}: must define exactly one Rule subclass (found {len(classes)})"
                )
                continue
            cls = classes[0]
            errs = validate_rule(cls, path)
            if errs:
                problems.append(f"{path}: {cls.__name__}: " + "; ".join(errs))
                continue
            cls.origin = path
            cls._module = module
            try:
                found.append(cls())
            except Exception as exc:
                problems.append(f"{path}: {cls.__name__}() failed: {type(exc).__name__}: {exc}")
    by_id: dict[str, Rule] = {}
    by_name: dict[str, Rule] = {}
    for r in found:
        if r.id in by_id:
            problems.append(f"{r.origin}: id {r.id} is also used by {by_id[r.id].origin}")
        if r.name in by_name:
            problems.append(f"{r.origin}: name {r.name} is also used by {by_name[r.name].origin}")
        by_id.setdefault(r.id, r)
        by_name.setdefault(r.name, r)
    cases = _case_index(dict.fromkeys(kdirs))
    for r in found:
        if r.id not in cases:
            where = ", ".join(str(k) for k in dict.fromkeys(kdirs) if k.is_dir()) or "no kernels/"
            problems.append(
                f"{r.origin}: {r.id} has no kernel case: no .cu file in {where} carries "
                f"`// expect: {r.id}`"
            )
    if problems:
        raise RuleLoadError(
            f"{len(problems)} problem(s) loading rules:\n  " + "\n  ".join(problems),
            "fix the rule file(s) named above",
        )
    rules = tuple(sorted(found, key=lambda r: r.id))
    reg = Registry(rules, {k: tuple(v) for k, v in cases.items()}, tuple(dirs))
    _REGISTRY_CACHE[key] = reg
    return reg


# ---------------------------------------------------------------------------------------------
# Running the rules


@dataclass(frozen=True)
class SkippedRule:
    """A selected rule that did not run: a model it needs is unavailable (``reason``, and
    ``why`` in a few words), or the time budget ran out first. ``deliberate``: the user turned
    that model off (``--no-trace``), which leaves the analysis complete."""

    rule: str
    name: str
    reason: str
    why: str
    deliberate: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": self.name,
            "reason": self.reason,
            "why": self.why,
            "deliberate": self.deliberate,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SkippedRule:
        return cls(
            str(d["rule"]),
            str(d["name"]),
            str(d["reason"]),
            str(d.get("why") or d["reason"]),
            bool(d.get("deliberate", False)),
        )


@dataclass(frozen=True)
class RulesRun:
    """The result of :func:`evaluate_rules`: ranked findings (error rows included), the rules
    run, notes (one per distinct reason rules were skipped for, naming them), and the rules
    skipped (``skipped``: selected, in ``rules_run``, but not evaluated). ``timings_s``: seconds
    per rule id (detect, estimate and transform of its findings).

    The run is :attr:`incomplete` when a rule was skipped for a reason the user did not choose
    (the trace stopped, the time budget ran out): :attr:`incomplete_text` says so in one line,
    every report format shows it, and ``analyze --fail-on`` fails on it."""

    findings: tuple[Finding, ...]
    rules_run: tuple[str, ...]
    notes: tuple[str, ...] = ()
    timings_s: Mapping[str, float] = field(default_factory=dict)
    skipped: tuple[SkippedRule, ...] = ()

    @property
    def incomplete(self) -> tuple[SkippedRule, ...]:
        """The rules skipped for a reason the user did not choose."""
        return tuple(s for s in self.skipped if not s.deliberate)

    @property
    def evaluated(self) -> tuple[str, ...]:
        """The rules that ran (``rules_run`` less those skipped)."""
        gone = {s.rule for s in self.skipped}
        return tuple(r for r in self.rules_run if r not in gone)

    @property
    def incomplete_text(self) -> str | None:
        """``incomplete: N rules skipped (why)``, or None when no rule was skipped but by the
        user's choice."""
        return incomplete_line(self.incomplete)

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "rules_run": list(self.rules_run),
            "notes": list(self.notes),
            "skipped_rules": [s.to_dict() for s in self.skipped],
            "incomplete": self.incomplete_text,
        }


def incomplete_line(skipped: Sequence[SkippedRule]) -> str | None:
    """``incomplete: 8 rules skipped (the trace stopped: an out-of-bounds access)`` for the
    rules ``skipped`` (each distinct reason once), or None when there are none."""
    if not skipped:
        return None
    whys = list(dict.fromkeys(s.why for s in skipped))
    n = len(skipped)
    return f"incomplete: {n} rule{'' if n == 1 else 's'} skipped ({'; '.join(whys)})"


def skipped_notes(skipped: Sequence[SkippedRule]) -> tuple[str, ...]:
    """One note per distinct reason rules were skipped for, naming the rules: a reason shared
    by eight rules (the trace stopped) is said once, not eight times."""
    by_reason: dict[str, list[SkippedRule]] = {}
    for s in skipped:
        by_reason.setdefault(s.reason, []).append(s)
    return tuple(
        f"{', '.join(f'{s.rule} ({s.name})' for s in rules)} not evaluated: {reason}"
        for reason, rules in by_reason.items()
    )


def skip_all(rules: Sequence[Rule], reason: str, why: str, notes: Sequence[str] = ()) -> RulesRun:
    """A run in which none of ``rules`` was evaluated, for ``reason`` (the time budget ran out
    before the rules ran)."""
    skipped = tuple(SkippedRule(r.id, r.name, reason, why) for r in rules)
    return RulesRun((), tuple(r.id for r in rules), (*notes, reason), skipped=skipped)


def models_needed(config: Config | None = None, registry: Registry | None = None) -> set[str]:
    """The models the enabled rules read (their ``models``): the pipeline computes those
    (``gpuadvise.analyze.models``), and traces the kernel only when one is in
    :data:`TRACE_MODELS`."""
    if registry is None:
        registry = load_registry(config.rules_dirs if config is not None else ())
    return models_of(registry.selected(config))


def models_of(rules: Iterable[Rule]) -> set[str]:
    """The models ``rules`` declare."""
    return {m for r in rules for m in r.models}


def _error_row(rule: Rule, ctx: RuleContext, stage: str, exc: BaseException) -> Finding:
    tb = traceback.extract_tb(exc.__traceback__)
    where = ""
    for frame in reversed(tb):
        if rule.origin is not None and Path(frame.filename) == rule.origin:
            where = f" at {Path(frame.filename).name}:{frame.lineno}"
            break
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Finding(
        rule=rule.id,
        name=rule.name,
        title=rule.title,
        severity="error",
        message=f"rule {rule.id} ({rule.name}) failed in {stage}{where}: {text}",
        file=None,
        line=None,
        kernel=ctx.kernel_name,
        error="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    )


# The launch model's check of every rule's estimate (gpuadvise.rules.estimates.model_check:
# a speedup of the kernel's work made a speedup of the launch, whose floor stays), installed by
# the rule API's package (gpuadvise/rules/__init__.py): the estimates import the engine, so the
# engine cannot import them.
_model_check: Callable[[RuleContext, Estimate], Estimate] | None = None


def use_model_check(check: Callable[[RuleContext, Estimate], Estimate] | None) -> None:
    """Run every rule's estimate through ``check`` (None: as the rule made it)."""
    global _model_check
    _model_check = check


def finding_estimate(rule: Rule, ctx: RuleContext, finding: Finding) -> Estimate | None:
    """The estimate :func:`evaluate_rules` gives ``finding`` before :func:`no_slowdown`: the
    rule's ``estimate``, run through the launch model's check (:func:`use_model_check`). The one
    path to it: a finding read back from JSON gets the same from its details."""
    est = rule.estimate(ctx, finding)
    if est is not None and _model_check is not None:
        est = _model_check(ctx, est)
    return est


def no_slowdown(f: Finding) -> Finding:
    """A finding whose estimate is below 1: the model predicts the change makes the launch
    slower, which is a reason not to recommend it, never a speedup. The estimate becomes
    ``none`` (its method says what the model predicted) and a warning becomes a note."""
    est = f.estimated_speedup
    if est is None or est.speedup is None or est.speedup >= 1.0:
        return f
    slower = 1.0 / est.speedup if est.speedup > 0 else float("inf")
    bound = "at best" if est.kind == "upper-bound" else "about"
    est = Estimate(
        None,
        "none",
        f"no speedup: the model predicts the change makes the launch {bound} {slower:.2f}x "
        f"slower ({est.speedup:.3g}x), so it is not recommended. {est.method}",
        {**est.inputs, "predicted_ratio": est.speedup, "predicted_kind": est.kind},
    )
    return replace(
        f, estimated_speedup=est, severity="note" if f.severity == "warning" else f.severity
    )


def evaluate_rules(
    context: RuleContext,
    config: Config | None = None,
    *,
    registry: Registry | None = None,
) -> RulesRun:
    """Run the enabled rules on one analysed kernel launch (``context``: its facts, the models
    the pipeline computed, the services; ``gpuadvise.analyze.evaluate`` builds it).

    Each rule's ``detect`` runs, then ``estimate`` and ``transform`` for each of its findings.
    A rule that raises becomes one error row (its findings dropped); the others go on. A rule
    that reads a model that is unavailable is skipped with a note. A finding whose line has a
    ``// gpuadvise: ignore[GA201]`` comment is dropped, and a note counts it
    (:mod:`gpuadvise.rules.suppress`).
    """
    if registry is None:
        registry = load_registry(config.rules_dirs if config is not None else ())
    if config is not None:
        registry.check_config(config)
    rules = registry.selected(config)
    findings: list[Finding] = []
    skipped: list[SkippedRule] = []
    timings: dict[str, float] = {}
    for rule in rules:
        t0 = time.perf_counter()
        ctx = context.for_rule(
            registry.options_for(rule, config), registry.severity_for(rule, config)
        )
        stage = "detect"
        try:
            detected = list(rule.detect(ctx))
            done = []
            for f in detected:
                stage = "estimate"
                est = finding_estimate(rule, ctx, f)
                stage = "transform"
                var = rule.transform(ctx, f)
                done.append(no_slowdown(replace(f, estimated_speedup=est, variant=var)))
            findings.extend(done)
        except ModelUnavailable as exc:
            skipped.append(SkippedRule(rule.id, rule.name, exc.message, exc.why, exc.deliberate))
        except Exception as exc:
            log.debug("rule %s failed", rule.id, exc_info=True)
            findings.append(_error_row(rule, ctx, stage, exc))
        timings[rule.id] = time.perf_counter() - t0
    findings, ignored = suppress(findings)
    notes = list(skipped_notes(skipped))
    if ignored:
        where = ", ".join(dict.fromkeys(f"{f.rule} at line {f.line}" for f in ignored))
        notes.append(
            f"{len(ignored)} finding{'s' if len(ignored) != 1 else ''} ignored by "
            f"`gpuadvise: ignore` comments ({where})"
        )
    return RulesRun(
        tuple(rank_findings(findings)),
        tuple(r.id for r in rules),
        tuple(notes),
        timings,
        tuple(skipped),
    )
