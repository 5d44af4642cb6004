"""What a rule reports: a :class:`Finding` (where, why, what fixing it is worth), its
:class:`Evidence`, the rule's :class:`Estimate`, the :class:`Variant` that should remove the
problem (a :class:`Proxy` when the change cannot be applied to the user's kernel), and what the GPU
measurement stage adds (:class:`Measurement`, :class:`Trial`); each with its JSON
(``to_dict``/``from_dict``).

Findings never claim a measured number: ``measured_speedup`` stays None until the GPU measurement
(wired by the pipeline) fills it. The rule's typed details (:class:`FindingDetails`) and their
JSON are in :mod:`gpuadvise.rules.details`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from gpuadvise.rules.context import Severity
from gpuadvise.rules.details import (
    FindingDetails,
    RuleLookup,
    details_from_dict,
    details_to_dict,
)

if TYPE_CHECKING:
    from gpuadvise.items import ReportItem

__all__ = [
    "SAFETY_CLASSES",
    "Estimate",
    "EstimateKind",
    "Evidence",
    "Finding",
    "Measurement",
    "Proxy",
    "RankBasis",
    "Safety",
    "Trial",
    "Variant",
]

Safety = Literal["automatic-and-verified", "proxy", "display-only"]
EstimateKind = Literal["point", "upper-bound", "none"]
RankBasis = Literal["measured", "estimated", "none"]
MeasurementKind = Literal["variant", "proxy"]

SAFETY_CLASSES: tuple[str, ...] = ("automatic-and-verified", "proxy", "display-only")


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
        if self.kind != "upper-bound":
            return f"~{self.speedup:.2f}x (estimated)"
        point = self.point
        if point is not None:  # issue 29: a point and an upper bound
            return f"~{point:.2f}x, ≤ {self.speedup:.2f}x (estimated: point, upper bound)"
        return f"≤ {self.speedup:.2f}x (estimated, upper bound)"

    @property
    def like_for_like(self) -> float | None:
        """The speedup a change is judged by (worth a warning, worth applying without a GPU):
        an upper bound made on the launch model compares the launch before the change, allowed
        the model's error, with the launch after it at peak rates and full overlap, which
        credits any change, even one that moves nothing, with that margin. Like for like: the
        larger of the model's prediction with both sides at sustained rates (``point_speedup``)
        and with both at peak rates and full overlap (``peak_speedup``), where the estimate has
        them, at most the bound; without a peak figure, a launch bound by memory bandwidth (DRAM
        or L2) before and after by its point. Otherwise the estimate's own number."""
        est = self.speedup
        if est is None or self.kind != "upper-bound":
            return est
        i = self.inputs
        point, peak = i.get("point_speedup"), i.get("peak_speedup")
        if isinstance(point, int | float) and isinstance(peak, int | float):
            return min(est, max(float(point), float(peak)))
        memory = ("dram", "l2")
        if (
            isinstance(point, int | float)
            and i.get("bound_by_before") in memory
            and i.get("bound_by_after") in memory
        ):
            return min(est, float(point))
        return est

    @property
    def point(self) -> float | None:
        """An upper bound's point prediction (``inputs["point_speedup"]``), where it has one
        below the bound by at least 0.005 and at least 1; None otherwise (a point estimate is
        its own ``speedup``)."""
        p = self.inputs.get("point_speedup") if self.kind == "upper-bound" else None
        if not isinstance(p, int | float) or self.speedup is None:
            return None
        if p < 1.0 or round(float(p), 2) >= round(self.speedup, 2):
            return None
        return float(p)

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
    ``needs_measurement``: whether the change pays depends on what ptxas makes of it (registers
    it allots to values held longer: GA309's hoist measured 0.72-1.12x on an H200); ``--fix``
    applies it only where a GPU measured it faster.
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
    needs_measurement: bool = False

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
            "needs_measurement": self.needs_measurement,
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
            bool(d.get("needs_measurement", False)),
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


_D = TypeVar("_D", bound=FindingDetails)


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
            "details": details_to_dict(self.details),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], registry: RuleLookup | None = None) -> Finding:
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
            details=details_from_dict(d["rule"], d.get("details"), registry),
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
