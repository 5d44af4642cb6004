"""Rule findings, the rules table and a rule's documentation as plain text lines (the console
adds colour)."""

from __future__ import annotations

import json
import os
import re
import shlex
import textwrap
from collections.abc import Sequence
from typing import Any

from gpuadvise.report.safe_text import one_line
from gpuadvise.report.source_lines import fix_kind
from gpuadvise.report.source_lines import shown_source as shown_source  # re-exported
from gpuadvise.report.source_lines import without_marker as without_marker  # re-exported
from gpuadvise.rules import (
    MODELS,
    Finding,
    Registry,
    Rule,
)
from gpuadvise.words import counted

plural = counted  # ``1 warning``, ``3 warnings`` (gpuadvise.words: the one place the rule is)


def statistics_lines(findings: Sequence[Finding]) -> list[str]:
    """``--statistics``: one line per rule, most findings first (as ``ruff --statistics``): the
    count, the id, the name and ``[*]`` when some of them have an automatic fix; then a total."""
    by_rule: dict[str, list[Finding]] = {}
    for f in findings:
        by_rule.setdefault(f.rule, []).append(f)
    rows = sorted(by_rule.values(), key=lambda fs: (-len(fs), fs[0].rule))
    width = max((len(fs[0].name) for fs in rows), default=0)
    out = []
    for fs in rows:
        auto = sum(
            1 for f in fs if f.variant is not None and f.variant.safety == "automatic-and-verified"
        )
        mark = f"[*] {auto} automatic" if auto else ""
        out.append(f"{len(fs):>5}  {fs[0].rule}  {one_line(fs[0].name):<{width}}  {mark}".rstrip())
    fixable = sum(
        1
        for f in findings
        if f.variant is not None and f.variant.safety == "automatic-and-verified"
    )
    total = f"{plural(len(findings), 'finding')}"
    if fixable:
        total += f" ({fixable} with an automatic fix: --diff shows them, --fix applies them)"
    out.append(f"{total}.")
    return out


def command_line(argv: Sequence[str]) -> str:
    """``gpuadvise ARGS`` as a shell would take it back (quoted where needed)."""
    return shlex.join(["gpuadvise", *argv])


def summary_text(run: Any, next_command: str | None = None, fixed: Any = None) -> str:
    """The terminal report's last line: the findings counted by severity, the top finding, and
    the command to run next (``--diff`` when a fix is automatic, else ``explain`` of the top
    rule). ``next_command``: the command that made the report (``--diff`` is added to it);
    ``fixed``: the result of ``--fix``/``--diff`` when they ran (then no next command)."""
    counts: dict[str, int] = {}
    for f in run.findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    if not run.findings:
        return f"Summary: no findings ({plural(len(run.rules_run), 'rule')} run)."
    parts = [plural(counts[k], k) for k in ("error", "warning", "note") if counts.get(k)]
    automatic = [
        f
        for f in run.findings
        if not f.is_error and f.variant is not None and f.variant.safety == "automatic-and-verified"
    ]
    text = "Summary: " + ", ".join(parts)
    if automatic:
        text += f" ({plural(len(automatic), 'automatic fix', 'automatic fixes')})"
    top = next((f for f in run.findings if not f.is_error), None)
    if top is not None:
        where = f" at {os.path.basename(top.file)}:{top.line}" if top.file and top.line else ""
        text += f"; top: {top.rule} {top.name}{where}, {top.speedup_label()}"
    text += "."
    if fixed is not None:
        return text
    if automatic and next_command:
        text += f" Next: `{next_command} --diff` shows the fixes as one diff (--fix writes it)."
    elif top is not None:
        text += f" Next: `gpuadvise explain {top.rule}` says why and how to fix it."
    return text


def finding_text(f: Finding, index: int | None = None) -> list[str]:
    """A finding as a few plain lines (the console adds colour)."""
    head = f"{index}. " if index is not None else ""
    loc = f.location()
    rel = _rel(loc) if loc else ""
    lines = [f"{head}{f.rule} {f.name} [{f.severity}] {rel}".rstrip()]
    lines.append(f"   {f.message}")
    if f.is_error:
        return lines
    if f.evidence:
        ev = ", ".join(_evidence(e) for e in f.evidence)
        lines.append(f"   evidence: {ev}")
    lines.append(f"   speedup: {f.speedup_label()}")
    if f.measured_speedup is not None and f.measured_speedup.samples:
        lines.append(f"   timing: {timing_text(f.measured_speedup)}")
    if len(f.trials) > 1 or any(t.measurement is None for t in f.trials):
        lines.append("   tried: " + "; ".join(_trial(t) for t in f.trials))
    if f.variant is not None:
        label = f"; {f.variant.label}" if f.variant.label else ""
        lines.append(
            f"   fix ({fix_kind(f.variant.safety, f.verified)}{label}): {f.variant.description}"
        )
        if f.variant.diff:
            lines += ["   " + ln for ln in f.variant.diff.rstrip("\n").splitlines()]
        elif f.variant.proxy is not None:
            p = f.variant.proxy
            lines.append(
                f"   proxy kernels: {p.before} (as written) and {p.after} (changed); "
                "--write-variants DIR saves them"
            )
    return lines


# why the adaptive A/B timing stopped (runner.stats.STOP_REASONS), as the report says it
STOP_TEXT = {
    "faster": "faster beyond doubt",
    "slower": "slower beyond doubt",
    "equivalent": "no practical difference (within the equivalence band)",
    "eliminated": "another variant is faster beyond doubt",
    "tied": "as fast as the best variant",
    "max-samples": "sample cap reached undecided",
    "max-time": "time cap reached undecided",
    "unverified": "not timed: outputs differ",
}


def timing_text(m: Any) -> str:
    """How much timing a measurement took and why it stopped: ``24 samples each, stopped:
    faster beyond doubt``."""
    text = f"{m.samples} samples each"
    if m.stop_reason:
        text += f", stopped: {STOP_TEXT.get(m.stop_reason, m.stop_reason)}"
    return text


def _trial(t: Any) -> str:
    name = t.label or "variant"
    if t.measurement is not None:
        m = t.measurement
        ci = f" [{m.ci_low:.3f}..{m.ci_high:.3f}]" if m.ci_low is not None else ""
        why = f", {m.stop_reason}" if m.stop_reason else ""
        n = f" ({m.samples} samples{why})" if m.samples else ""
        return f"{name} {m.speedup:.3f}x{ci}{n}"
    return f"{name}: {t.note or 'not measured'}"


def _evidence(e: Any) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return str(v)

    text = f"{e.metric} = {fmt(e.value)}{(' ' + e.unit) if e.unit else ''}"
    if e.threshold is not None and e.op:
        text += f" ({e.op} {fmt(e.threshold)})"
    return text


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def rules_table(registry: Registry, enabled: set[str] | None = None) -> list[str]:
    """One line per rule: id, name, models, title (``-`` before disabled ones)."""
    wid = max((len(r.name) for r in registry), default=4)
    wmod = max((len(",".join(r.models)) for r in registry), default=6)
    out = []
    for r in registry:
        mark = " " if enabled is None or r.id in enabled else "-"
        out.append(
            f"{mark}{r.id}  {r.name:<{wid}}  {','.join(r.models):<{wmod}}  {one_line(r.title)}".rstrip()
        )
    return out


def explain_text(rule: Rule, registry: Registry | None = None) -> str:
    """One rule's documentation: header, options with defaults, kernel cases, the docstring."""
    out = [f"{rule.id} {rule.name}: {rule.title}", ""]
    models = ", ".join(rule.models) or "none"
    out.append(f"Severity: {rule.severity}. Models: {models}.")
    for m in rule.models:
        out.append(f"  {m}: {MODELS[m]}")
    if rule.options:
        out.append(f"Options (defaults; set them in [tool.gpuadvise.rules.{rule.id}]):")
        for k, v in rule.options.items():
            out.append(f"  {k} = {json.dumps(v)}")
    else:
        out.append("Options: none.")
    if registry is not None and registry.cases.get(rule.id):
        cases = ", ".join(_rel(str(p)) for p in registry.cases[rule.id])
        out.append(f"Kernel cases: {cases}")
    if rule.origin is not None:
        out.append(f"Defined in: {_rel(str(rule.origin))}")
    out.append("")
    out.append(rule.doc())
    return "\n".join(out).rstrip() + "\n"


_ROLE = re.compile(r":(?:func|class|meth|data|mod|attr):`~?([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``")


def rst_to_markdown(doc: str) -> str:
    """A rule's docstring (reStructuredText as the rules write it) as Markdown: ``Heading`` +
    ``-----`` -> ``## Heading``, ````code```` -> ```code```, a paragraph ending in ``::`` and
    its indented block -> a fenced CUDA block, ``:func:`x``` -> ```x```."""
    lines = doc.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if (
            line.strip()
            and nxt.strip()
            and set(nxt.strip()) <= set("-=~")
            and len(nxt.strip()) >= 3
        ):
            out.append(f"## {line.strip()}")
            i += 2
            continue
        if line.rstrip().endswith("::") and not line.strip() == "::":
            out.append(_inline(line.rstrip()[:-1]))
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            body = textwrap.dedent("\n".join(b for b in block)).strip("\n")
            out += ["", "```cuda", body, "```", ""]
            continue
        out.append(_inline(line))
        i += 1
    return "\n".join(out).strip() + "\n"


def _inline(text: str) -> str:
    return _LITERAL.sub(lambda m: f"`{m.group(1)}`", _ROLE.sub(lambda m: f"`{m.group(1)}`", text))


def explain_markdown(rule: Rule, registry: Registry | None = None) -> str:
    """:func:`explain_text` as Markdown, for the terminal to render."""
    out = [f"**{rule.id} {rule.name}**: {_inline(rule.title)}", ""]
    models = ", ".join(rule.models) or "none"
    out.append(f"Severity: {rule.severity}. Models: {models}.")
    out.append("")
    for m in rule.models:
        out.append(f"- `{m}`: {MODELS[m]}")
    if rule.options:
        out += ["", f"Options (defaults; set them in `[tool.gpuadvise.rules.{rule.id}]`):", ""]
        for k, v in rule.options.items():
            out.append(f"- `{k} = {json.dumps(v)}`")
    else:
        out += ["", "Options: none."]
    if registry is not None and registry.cases.get(rule.id):
        cases = ", ".join(f"`{_rel(str(p))}`" for p in registry.cases[rule.id])
        out += ["", f"Kernel cases: {cases}"]
    if rule.origin is not None:
        out += ["", f"Defined in: `{_rel(str(rule.origin))}`"]
    out += ["", rst_to_markdown(rule.doc())]
    return "\n".join(out)
