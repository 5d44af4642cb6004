"""Rule findings, the rules table and a rule's documentation as plain text lines (the console
adds colour), from the report's data (the document's findings, :class:`RuleDoc`): no rule is
imported here."""

from __future__ import annotations

import json
import os
import re
import shlex
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from gpuadvise.report.safe_text import one_line
from gpuadvise.report.source_lines import fix_kind
from gpuadvise.report.source_lines import shown_source as shown_source  # re-exported
from gpuadvise.report.source_lines import without_marker as without_marker  # re-exported
from gpuadvise.report_types import AnalysisReport, RuleDoc
from gpuadvise.words import counted

plural = counted  # ``1 warning``, ``3 warnings`` (gpuadvise.words: the one place the rule is)


def _automatic(f: Mapping[str, Any]) -> bool:
    """Whether finding ``f`` (a document's) has an automatic fix."""
    v = f.get("variant")
    return v is not None and v.get("safety") == "automatic-and-verified"


def statistics_lines(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    """``--statistics``: one line per rule, most findings first (as ``ruff --statistics``): the
    count, the id, the name and ``[*]`` when some of them have an automatic fix; then a total.
    ``findings``: as the report's document has them."""
    by_rule: dict[str, list[Mapping[str, Any]]] = {}
    for f in findings:
        by_rule.setdefault(str(f["rule"]), []).append(f)
    rows = sorted(by_rule.values(), key=lambda fs: (-len(fs), str(fs[0]["rule"])))
    width = max((len(str(fs[0]["name"])) for fs in rows), default=0)
    out = []
    for fs in rows:
        auto = sum(1 for f in fs if _automatic(f))
        mark = f"[*] {auto} automatic" if auto else ""
        name = one_line(str(fs[0]["name"]))
        out.append(f"{len(fs):>5}  {fs[0]['rule']}  {name:<{width}}  {mark}".rstrip())
    fixable = sum(1 for f in findings if _automatic(f))
    total = f"{plural(len(findings), 'finding')}"
    if fixable:
        total += f" ({fixable} with an automatic fix: --diff shows them, --fix applies them)"
    out.append(f"{total}.")
    return out


def command_line(argv: Sequence[str]) -> str:
    """``gpuadvise ARGS`` as a shell would take it back (quoted where needed)."""
    return shlex.join(["gpuadvise", *argv])


def summary_text(report: AnalysisReport) -> str:
    """The terminal report's last line: the findings counted by severity, the top finding, and
    the command to run next (``--diff`` when a fix is automatic, else ``explain`` of the top
    rule). The report's ``command`` is the command that made it (``--diff`` is added to it);
    when ``--fix``/``--diff`` ran (the document has its ``fix``), there is no next command."""
    doc = report.document
    found = report.findings
    counts: dict[str, int] = {}
    for f in found:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    if not found:
        return f"Summary: no findings ({plural(len(doc.get('rules_run') or ()), 'rule')} run)."
    parts = [plural(counts[k], k) for k in ("error", "warning", "note") if counts.get(k)]
    automatic = [f for f in found if f.get("error") is None and _automatic(f)]
    text = "Summary: " + ", ".join(parts)
    if automatic:
        text += f" ({plural(len(automatic), 'automatic fix', 'automatic fixes')})"
    top = next(((i, f) for i, f in enumerate(found) if f.get("error") is None), None)
    if top is not None:
        i, f = top
        file, line = f.get("file"), f.get("line")
        where = f" at {os.path.basename(file)}:{line}" if file and line else ""
        text += f"; top: {f['rule']} {f['name']}{where}, {report.speedup(i)}"
    text += "."
    if doc.get("fix") is not None:
        return text
    if automatic and report.command:
        text += f" Next: `{report.command} --diff` shows the fixes as one diff (--fix writes it)."
    elif top is not None:
        text += f" Next: `gpuadvise explain {top[1]['rule']}` says why and how to fix it."
    return text


def _location(f: Mapping[str, Any]) -> str:
    file, line = f.get("file"), f.get("line")
    if file is None:
        return ""
    return f"{file}:{line}" if line else str(file)


def finding_text(
    f: Mapping[str, Any], index: int | None = None, speedup: str = "no estimate"
) -> list[str]:
    """A finding (as the report's document has it) as a few plain lines (the console adds
    colour); ``speedup``: its speedup in the reports' words (the report's ``speedups``)."""
    head = f"{index}. " if index is not None else ""
    loc = _location(f)
    rel = _rel(loc) if loc else ""
    lines = [f"{head}{f['rule']} {f['name']} [{f['severity']}] {rel}".rstrip()]
    lines.append(f"   {f['message']}")
    if f.get("error") is not None:
        return lines
    if f.get("evidence"):
        ev = ", ".join(_evidence(e) for e in f["evidence"])
        lines.append(f"   evidence: {ev}")
    lines.append(f"   speedup: {speedup}")
    measured = f.get("measured_speedup")
    if measured is not None and measured.get("samples"):
        lines.append(f"   timing: {timing_text(measured)}")
    trials = f.get("trials") or ()
    if len(trials) > 1 or any(t.get("measured_speedup") is None for t in trials):
        lines.append("   tried: " + "; ".join(_trial(t) for t in trials))
    v = f.get("variant")
    if v is not None:
        label = f"; {v['label']}" if v.get("label") else ""
        kind = fix_kind(v["safety"], f.get("verified"))
        lines.append(f"   fix ({kind}{label}): {v['description']}")
        if v.get("diff"):
            lines += ["   " + ln for ln in v["diff"].rstrip("\n").splitlines()]
        elif v.get("proxy") is not None:
            p = v["proxy"]
            lines.append(
                f"   proxy kernels: {p['before']} (as written) and {p['after']} (changed); "
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


def timing_text(m: Mapping[str, Any]) -> str:
    """How much timing a measurement (as a finding's document has it) took and why it stopped:
    ``24 samples each, stopped: faster beyond doubt``."""
    text = f"{m.get('samples')} samples each"
    stop = m.get("stop_reason")
    if stop:
        text += f", stopped: {STOP_TEXT.get(stop, stop)}"
    return text


def _trial(t: Mapping[str, Any]) -> str:
    name = t.get("label") or "variant"
    m = t.get("measured_speedup")
    if m is not None:
        ci = f" [{m['ci_low']:.3f}..{m['ci_high']:.3f}]" if m.get("ci_low") is not None else ""
        why = f", {m['stop_reason']}" if m.get("stop_reason") else ""
        n = f" ({m['samples']} samples{why})" if m.get("samples") else ""
        return f"{name} {m['speedup']:.3f}x{ci}{n}"
    return f"{name}: {t.get('note') or 'not measured'}"


def _evidence(e: Mapping[str, Any]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return str(v)

    unit = e.get("unit")
    text = f"{e['metric']} = {fmt(e.get('value'))}{(' ' + unit) if unit else ''}"
    if e.get("threshold") is not None and e.get("op"):
        text += f" ({e['op']} {fmt(e['threshold'])})"
    return text


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def rules_table(rules: Sequence[RuleDoc], enabled: set[str] | None = None) -> list[str]:
    """One line per rule: id, name, models, title (``-`` before disabled ones)."""
    wid = max((len(r.name) for r in rules), default=4)
    wmod = max((len(_model_names(r)) for r in rules), default=6)
    out = []
    for r in rules:
        mark = " " if enabled is None or r.id in enabled else "-"
        out.append(
            f"{mark}{r.id}  {r.name:<{wid}}  {_model_names(r):<{wmod}}  {one_line(r.title)}".rstrip()
        )
    return out


def _model_names(rule: RuleDoc) -> str:
    return ",".join(m for m, _ in rule.models)


def explain_text(rule: RuleDoc) -> str:
    """One rule's documentation: header, options with defaults, kernel cases, the docstring."""
    out = [f"{rule.id} {rule.name}: {rule.title}", ""]
    models = ", ".join(m for m, _ in rule.models) or "none"
    out.append(f"Severity: {rule.severity}. Models: {models}.")
    for m, what in rule.models:
        out.append(f"  {m}: {what}")
    if rule.options:
        out.append(f"Options (defaults; set them in [tool.gpuadvise.rules.{rule.id}]):")
        for k, v in rule.options:
            out.append(f"  {k} = {json.dumps(v)}")
    else:
        out.append("Options: none.")
    if rule.cases:
        out.append(f"Kernel cases: {', '.join(_rel(p) for p in rule.cases)}")
    if rule.origin is not None:
        out.append(f"Defined in: {_rel(rule.origin)}")
    out.append("")
    out.append(rule.doc)
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


def explain_markdown(rule: RuleDoc) -> str:
    """:func:`explain_text` as Markdown, for the terminal to render."""
    out = [f"**{rule.id} {rule.name}**: {_inline(rule.title)}", ""]
    models = ", ".join(m for m, _ in rule.models) or "none"
    out.append(f"Severity: {rule.severity}. Models: {models}.")
    out.append("")
    for m, what in rule.models:
        out.append(f"- `{m}`: {what}")
    if rule.options:
        out += ["", f"Options (defaults; set them in `[tool.gpuadvise.rules.{rule.id}]`):", ""]
        for k, v in rule.options:
            out.append(f"- `{k} = {json.dumps(v)}`")
    else:
        out += ["", "Options: none."]
    if rule.cases:
        cases = ", ".join(f"`{_rel(p)}`" for p in rule.cases)
        out += ["", f"Kernel cases: {cases}"]
    if rule.origin is not None:
        out += ["", f"Defined in: `{_rel(rule.origin)}`"]
    out += ["", rst_to_markdown(rule.doc)]
    return "\n".join(out)
