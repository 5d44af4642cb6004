"""The Rule base class, and what a rule class must be (:func:`validate_rule`).

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

The registry (:mod:`gpuadvise.rules.registry`) loads the rule files and validates every rule
class with :func:`validate_rule`.
"""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from gpuadvise.rules.context import RuleContext, Severity
from gpuadvise.rules.details import FindingDetails
from gpuadvise.rules.findings import Estimate, Evidence, Finding, Variant

if TYPE_CHECKING:
    from gpuadvise.items import ReportRule

__all__ = [
    "DOC_HEADINGS",
    "MODELS",
    "OPTION_TYPES",
    "SEVERITIES",
    "Rule",
    "doc_sections",
    "validate_rule",
]

SEVERITIES: tuple[str, ...] = ("error", "warning", "note")
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


class Rule(ABC):
    """Base class of every rule; see the module docstring and DESIGN.md ("A rule")."""

    id: ClassVar[str] = ""
    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    severity: ClassVar[Severity] = "warning"
    models: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[Mapping[str, bool | int | float | str]] = {}
    origin: ClassVar[Path | None] = None  # the file it was loaded from (set by the registry)
    # the change rewrites what the kernel executes in ways the rule's estimate on the kernel's
    # own trace cannot follow (a loop restructured, values moved into registers, the grid
    # changed): analyze takes the point from the launch model run on the variant's own trace
    # (gpuadvise.analyze.variant_trace)
    point_from_variant_trace: ClassVar[bool] = False
    # the rule's variants are layout proxies whose own point (``proxy_point_speedup``) analyze
    # takes from the launch model on the proxy's two kernels' own traces
    # (gpuadvise.analyze.proxy_trace), not from the line's records on the kernel's trace
    proxy_point_from_trace: ClassVar[bool] = False
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

    def variants_ahead(self, ctx: RuleContext) -> Sequence[Variant]:
        """The candidates a finding of this rule would offer, known before the models it waits
        for (GA304's tile sizes depend on the source and the grid, not on the L2 model that
        says which is best and whether there is a finding): ``analyze --measure`` compiles
        them for the GPU while the model is computed. Only a speculation: what is measured
        is the finding's own variant (its candidates take these builds where they build the
        same: diff, flags, defines, launch). Default: none."""
        return ()

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
