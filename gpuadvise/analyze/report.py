"""The report of an analysis, built once: :func:`build_report` from a live analysis,
:func:`report_from_document` from a saved ``analyze --json`` document, :func:`load_report` from
a file (``gpuadvise render``). Everything a format shows is computed here (the JSON document,
the occupancy sweeps, the source lines, the kernel's line range, the findings as CI items, the
rules SARIF lists), so that the renderers (:mod:`gpuadvise.report`) only format
(:class:`~gpuadvise.report_types.AnalysisReport`)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import ConfigError
from gpuadvise.items import ReportItem
from gpuadvise.model.occupancy import INT_MAX, KernelResources, OccupancyResult, Suggestion
from gpuadvise.report_types import (
    BATCH_REPORT_KIND,
    REPORT_KIND,
    SCHEMA_VERSION,
    AnalysisReport,
    BatchCase,
    BatchReport,
    NewerReportError,
    ReportHeader,
)

__all__ = [
    "analyze_json",
    "batch_from_document",
    "build_batch_report",
    "build_report",
    "header_json",
    "report_header",
    "load_report",
    "memory_json",
    "occupancy_json",
    "read_report_json",
    "report_from_data",
    "report_from_document",
    "skipped_items",
    "sweeps_json",
]

# A source file larger than this is not quoted (a report names files; it never reads a device)
_SOURCE_LIMIT_BYTES = 64 << 20


def build_report(
    analysis: Any, rules: Any, fixed: Any = None, command: str | None = None
) -> AnalysisReport:
    """The report of one analysis (pipeline.KernelAnalysis) and its rules' run (RulesRun);
    ``fixed``: the composed fixes of --fix/--diff (analyze.fix.FixResult), when made;
    ``command``: the command line that made it (the terminal's summary names it)."""
    doc = analyze_json(analysis, rules)
    if fixed is not None:
        doc["fix"] = fixed.to_dict()
    kernel = analysis.kernel.name
    items = [f.to_report_item() for f in rules.findings] + skipped_items(rules, kernel)
    report = _complete(
        doc,
        tuple(sweeps_json(analysis.device, analysis.occupancy_input)),
        items,
        tuple(rules.notes),
    )
    return replace(
        report,
        analysis_notes=tuple(analysis.notes),
        speedups=tuple(f.speedup_label() for f in rules.findings),
        command=command,
    )


def build_batch_report(results: Sequence[Any]) -> BatchReport:
    """The report of ``analyze FOLDER``: ``results``, CaseResults of gpuadvise.analyze.batch
    in the cases' order, each case's report built once."""
    from gpuadvise.analyze.batch import ranked
    from gpuadvise.rules.registry import load_registry

    reports = {
        id(r): None if r.result is None else build_report(r.result.analysis, r.result.rules)
        for r in results
    }
    return BatchReport(
        summary=tuple(_summary_row(i, r) for i, r in enumerate(ranked(results), 1)),
        cases=tuple(BatchCase(r.case.id, r.error, reports[id(r)]) for r in results),
        rules=tuple(r.report_rule() for r in load_registry()),
    )


def _summary_row(rank: int, r: Any) -> dict[str, Any]:
    return {
        "rank": rank,
        "case": r.case.id,
        "kernel": None if r.result is None else r.result.analysis.kernel.name,
        "error": r.error,
        "findings": len(r.findings),
        "incomplete": None if r.result is None else r.result.rules.incomplete_text,
        "best_rule": r.best_rule,
        "best_line": r.best_line,
        "best_speedup": r.best_speedup,
        "kernel_ms": r.kernel_ms,
        "kernel_basis": r.kernel_basis,
        "time_to_win_ms": r.time_to_win_ms,
        "basis": r.basis,
        "wall_s": round(r.wall_s, 3),
    }


def report_from_document(
    doc: Any, sources: Mapping[str, Sequence[str]] | None = None
) -> AnalysisReport:
    """The report of a saved ``analyze --json`` document: the sweeps recomputed from the device
    preset (none for another device), the source files read again, the findings and skipped
    rules made CI items. ``sources``: file path -> lines, instead of reading those files.
    ``ValueError`` for a document that is not one ``analyze --json`` writes; its CI formats'
    notes are the document's (it does not tell the rules' notes from the analysis's)."""
    from gpuadvise.rules.evaluate import SkippedRule
    from gpuadvise.rules.findings import Finding

    _check_document(doc)
    kernel = str(doc["kernel"]["name"])
    items = [_finding_item(f, Finding) for f in doc["findings"]]
    try:
        skipped = [SkippedRule.from_dict(s) for s in doc.get("skipped_rules") or []]
    except (KeyError, TypeError, ValueError, AttributeError, LookupError) as exc:
        raise ValueError(f"a skipped rule cannot be read: {exc!r}") from None
    items += _skipped(tuple(s for s in skipped if not s.deliberate), kernel)
    notes = tuple(str(n) for n in doc.get("notes") or ())
    report = _complete(dict(doc), tuple(_saved_sweeps(doc)), items, notes, sources)
    return replace(report, speedups=tuple(_speedup_label(f, Finding) for f in doc["findings"]))


def _speedup_label(f: Any, finding: Any) -> str:
    """A saved finding's speedup in the reports' words (``no estimate`` for one this gpuadvise
    does not read whole)."""
    try:
        label: str = finding.from_dict(f).speedup_label()
        return label
    except (KeyError, TypeError, ValueError, AttributeError, LookupError):
        return "no estimate"


def _finding_item(f: Any, finding: Any) -> ReportItem:
    """A saved finding as a CI item: as the finding makes it, or, for one this gpuadvise does
    not read whole (an older estimate's kind, a rule it does not have), from its plain fields."""
    try:
        item: ReportItem = finding.from_dict(f).to_report_item()
        return item
    except (KeyError, TypeError, ValueError, AttributeError, LookupError):
        pass
    if not isinstance(f, dict):
        raise ValueError("a finding is not an object")
    try:
        line = f.get("line")
        return ReportItem(
            rule_id=str(f["rule"]),
            level=f["severity"],
            message=str(f["message"]),
            file=None if f.get("file") is None else str(f["file"]),
            line=line if isinstance(line, int) and not isinstance(line, bool) else None,
            title=None if f.get("title") is None else str(f["title"]),
            group=None if f.get("kernel") is None else str(f["kernel"]),
            properties={"rule_name": str(f.get("name") or "")},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a finding cannot be read: {exc!r}") from None


def load_report(path: str) -> AnalysisReport | BatchReport:
    """The report in ``path``: a saved report (``analyze --format report``, of one kernel or of
    a folder) or an ``analyze --json`` document (of one kernel or of a folder); a one-line
    :class:`ConfigError` for a missing file, one that is not JSON or not a gpuadvise analysis
    report, or one a newer gpuadvise wrote."""
    return report_from_data(read_report_json(path), path)


def read_report_json(path: str) -> Any:
    """The parsed JSON in ``path`` (a report or a document); a one-line :class:`ConfigError`
    for a missing file or one that is not JSON."""
    from gpuadvise.inputfiles import parse_json, read_input_bytes

    data = read_input_bytes(path, "report", missing_hint="check the path")
    try:
        return parse_json(data)
    except ValueError as exc:
        raise ConfigError(f"report {path} is not JSON ({exc})", _HINT) from None


_HINT = "give a file written by `gpuadvise analyze --format json` (or --format report)"


def report_from_data(doc: Any, path: str) -> AnalysisReport | BatchReport:
    """The analysis report in the parsed JSON ``doc`` read from ``path`` (see
    :func:`load_report`)."""
    try:
        if isinstance(doc, dict) and doc.get("kind") == REPORT_KIND:
            return AnalysisReport.from_dict(doc)
        if isinstance(doc, dict) and doc.get("kind") == BATCH_REPORT_KIND:
            return BatchReport.from_dict(doc)
        if isinstance(doc, dict) and "cases" in doc and "kernel" not in doc:
            return batch_from_document(doc)
        return report_from_document(doc)
    except NewerReportError as exc:
        raise ConfigError(f"report {path}: {exc}", "render it with a newer gpuadvise") from None
    except ValueError as exc:
        raise ConfigError(
            f"report {path} is not a gpuadvise analysis report ({exc})", _HINT
        ) from None


def batch_from_document(doc: Any) -> BatchReport:
    """The report of a saved ``analyze FOLDER --format json`` document: each case's analysis
    made a report (:func:`report_from_document`). ``ValueError`` for anything else."""
    from gpuadvise.rules.registry import load_registry

    _check_schema(doc)
    summary, cases = doc.get("summary"), doc.get("cases")
    if not isinstance(summary, list) or not all(isinstance(s, dict) for s in summary):
        raise ValueError("no summary list")
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise ValueError("no cases list")
    out = []
    for c in cases:
        name, error, analysis = c.get("case"), c.get("error"), c.get("analysis")
        if not isinstance(name, str) or not (error is None or isinstance(error, str)):
            raise ValueError("a case has no name")
        out.append(
            BatchCase(name, error, None if analysis is None else report_from_document(analysis))
        )
    return BatchReport(
        summary=tuple(summary),
        cases=tuple(out),
        rules=tuple(r.report_rule() for r in load_registry()),
    )


def _check_schema(doc: Any) -> None:
    """``ValueError`` unless ``doc`` is a JSON object with a ``schema_version`` this gpuadvise
    reads (:class:`NewerReportError` for a newer one)."""
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError("no schema_version")
    if version > SCHEMA_VERSION:
        raise NewerReportError(
            f"schema version {version} is newer than this gpuadvise reads ({SCHEMA_VERSION})"
        )


def _check_document(doc: Any) -> None:
    _check_schema(doc)
    kernel = doc.get("kernel")
    if not isinstance(kernel, dict) or not isinstance(kernel.get("name"), str):
        raise ValueError("no kernel")
    for key in ("findings", "sass_lines"):
        if not isinstance(doc.get(key), list):
            raise ValueError(f"no {key} list")
    for key in ("occupancy", "resources", "device"):
        if not isinstance(doc.get(key), dict):
            raise ValueError(f"no {key}")


def _complete(
    doc: dict[str, Any],
    sweeps: tuple[dict[str, Any], ...],
    items: list[ReportItem],
    run_notes: tuple[str, ...],
    given: Mapping[str, Sequence[str]] | None = None,
) -> AnalysisReport:
    """The report of ``doc``: its source files read (or taken from ``given``), the kernel's
    line range found, the rules SARIF lists loaded."""
    from gpuadvise.rules.registry import load_registry

    sources = {path: _source_lines(path, given) for path in sorted(set(_files(doc)))}
    main = doc["kernel"].get("file")
    lines = sources.get(main) if isinstance(main, str) else None
    span = None if lines is None else _kernel_range(lines, str(doc["kernel"]["name"]))
    return AnalysisReport(
        document=doc,
        sweeps=sweeps,
        sources=sources,
        kernel_lines=span,
        items=tuple(items),
        rules=tuple(r.report_rule() for r in load_registry()),
        run_notes=run_notes,
    )


# keys whose text names a source file (the registers' ``sites_table`` holds [file, line] pairs)
_FILE_KEYS = frozenset({"file", "peak_file", "def_file", "last_use_file"})


def _files(value: Any) -> Iterator[str]:
    """Every source file ``value`` (a document) names."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in _FILE_KEYS and isinstance(v, str) and v:
                yield v
            elif k == "sites_table" and isinstance(v, list):
                for site in v:
                    if isinstance(site, list | tuple) and site and isinstance(site[0], str):
                        yield site[0]
            elif isinstance(v, dict | list):
                yield from _files(v)
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, dict | list):
                yield from _files(v)


def _key(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


def _source_lines(path: str, given: Mapping[str, Sequence[str]] | None) -> tuple[str, ...] | None:
    """The lines of ``path`` (from ``given`` when it has them), None when it is not readable."""
    if given is not None:
        lines = given.get(path)
        if lines is None:
            lines = next((v for k, v in given.items() if _key(k) == _key(path)), None)
        if lines is not None:
            return tuple(lines)
    from gpuadvise.inputfiles import read_cache_bytes
    from gpuadvise.source.text import is_binary_data

    data = read_cache_bytes(path, _SOURCE_LIMIT_BYTES)
    if data is None or is_binary_data(data):
        return None  # no source lines to show of a cubin or a fat binary
    return tuple(data.decode("utf-8", errors="replace").splitlines())


def _kernel_range(lines: Sequence[str], name: str) -> tuple[int, int] | None:
    """The 1-based first and last line of kernel ``name``'s definition in ``lines``."""
    from gpuadvise.source.signature import find_kernels

    base = name.split("<", 1)[0].split("::")[-1].strip()
    try:
        decls = [
            d
            for d in find_kernels("\n".join(lines))
            if d.is_definition and d.name.split("::")[-1] == base
        ]
    except Exception:  # the parser is best-effort here: the view falls back to the data lines
        return None
    if len(decls) != 1:
        return None
    start = decls[0].line
    depth, opened = 0, False
    for i in range(start - 1, min(len(lines), start + 2000)):
        code = lines[i].split("//", 1)[0]
        for ch in code:
            if ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
        if opened and depth <= 0:
            return start, i + 1
    return None


def sweeps_json(device: Any, resources: Any, carveout: int = -1) -> list[dict[str, Any]]:
    """The occupancy calculator's three sweeps (block size, registers, shared memory) as JSON."""
    from gpuadvise.model.occupancy import sweeps

    return [
        {
            "resource": s.resource,
            "values": list(s.values),
            "occupancy": list(s.occupancy),
            "current": s.current,
        }
        for s in sweeps(device, resources, carveout)
    ]


def _saved_sweeps(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A saved document's sweeps, or recomputed from its device preset; none when neither."""
    occ = doc.get("occupancy") or {}
    if occ.get("sweeps"):
        return list(occ["sweeps"])
    dev = doc.get("device") or {}
    inp = occ.get("input") or {}
    try:
        from gpuadvise.devices import preset

        device = preset(str(dev.get("name")))
        if device.arch != dev.get("arch"):
            raise ValueError("another architecture")
        k = KernelResources(
            threads_per_block=int(inp["threads_per_block"]),
            regs_per_thread=int(inp["registers_per_thread"]),
            static_smem_bytes=int(inp["static_smem_bytes"]),
            dynamic_smem_bytes=int(inp["dynamic_smem_bytes"]),
        )
        return sweeps_json(device, k, int(inp.get("carveout_pct", -1)))
    except Exception:  # a live device, or an old document: the page says so instead of guessing
        return []


def skipped_items(checked: Any, kernel: str) -> list[ReportItem]:
    """A report item (outcome ``skip``, level ``none``: no SARIF result, no GitHub annotation)
    for each rule ``checked`` (a RulesRun) skipped for a reason the user did not choose."""
    return _skipped(getattr(checked, "incomplete", ()), kernel)


def _skipped(skipped: Sequence[Any], kernel: str) -> list[ReportItem]:
    return [
        ReportItem(
            rule_id=s.rule,
            level="none",
            message=f"{s.rule} ({s.name}) not evaluated: {s.why} (the run's notes say more)",
            title=f"{s.rule} not evaluated",
            group=kernel,
            outcome="skip",
            properties={"rule_name": s.name, "skipped": s.why},
        )
        for s in skipped
    ]


# ---------------------------------------------------------------------------------------------
# The ``analyze --json`` document (schema_version 1; the schema is in the README).


def _limit(v: int) -> int | None:
    return None if v >= INT_MAX else v


def occupancy_json(
    device: DeviceSpec,
    k: KernelResources,
    carveout: int,
    r: OccupancyResult,
    steps: list[Suggestion],
    notes: list[str],
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "device": {"name": device.name, "arch": device.arch, "cc": device.cc},
        "input": {
            "threads_per_block": k.threads_per_block,
            "registers_per_thread": k.regs_per_thread,
            "static_smem_bytes": k.static_smem_bytes,
            "dynamic_smem_bytes": k.dynamic_smem_bytes,
            "carveout_pct": carveout,
        },
        "active_blocks_per_sm": r.active_blocks_per_sm,
        "active_warps_per_sm": r.active_warps_per_sm,
        "active_threads_per_sm": r.active_warps_per_sm * device.warp_size,
        "max_warps_per_sm": r.max_warps_per_sm,
        "occupancy": r.occupancy,
        "limiters": list(r.limiters),
        "limits": {
            name: _limit(r.limits[name])
            for name in ("warps", "registers", "shared_memory", "blocks", "barriers")
        },
        "allocation": {
            "registers_per_block": r.allocated_regs_per_block,
            "smem_per_block_bytes": r.allocated_smem_per_block,
            "smem_per_sm_bytes": r.smem_per_sm_bytes,
        },
        "next_steps": [
            {
                "resource": s.resource,
                "value": s.value,
                "active_warps_per_sm": s.active_warps_per_sm,
                "occupancy": s.occupancy,
                "text": s.text,
            }
            for s in steps
        ],
        "notes": notes,
    }


def header_json(a: Any) -> dict[str, Any]:
    """The header sections of the ``analyze --json`` document (kernel, device, resources,
    occupancy, waves): what is known before the trace. ``a``: the analysis
    (pipeline.KernelAnalysis) or its head (pipeline.AnalysisHead, handed out before the trace):
    both give the same sections, so that the header printed early is the finished report's."""
    spec, d, k = a.spec, a.device, a.kernel
    res = k.resources
    w = a.waves
    return {
        "kernel": {
            "name": k.name,
            "mangled": k.mangled,
            "file": str(spec.source),
            "grid": list(spec.launch.grid.as_tuple()),
            "block": list(spec.launch.block.as_tuple()),
            "dynamic_smem_bytes": spec.launch.dynamic_smem_bytes,
        },
        "device": d.to_json(),
        "resources": {
            "registers": res.registers,
            "static_smem_bytes": res.static_smem_bytes,
            "local_bytes": res.local_bytes,
            "spill_store_bytes": res.spill_store_bytes,
            "spill_load_bytes": res.spill_load_bytes,
            "const_bytes": res.const_bytes,
            "barriers": res.barriers,
        },
        "occupancy": occupancy_json(d, a.occupancy_input, -1, a.occupancy, list(a.next_steps), []),
        "waves": None
        if w is None
        else {
            "total_ctas": w.total_ctas,
            "ctas_per_wave": w.ctas_per_wave,
            "waves": w.waves,
            "last_wave_ctas": w.last_wave_ctas,
            "last_wave_fill": w.last_wave_fill,
            "tail_idle": w.tail_idle,
        },
    }


def report_header(a: Any) -> ReportHeader:
    """The :class:`ReportHeader` of an analysis or of its head (:func:`header_json`)."""
    return ReportHeader.from_document(header_json(a))


def analyze_json(a: Any, rules_run: Any = None) -> dict[str, Any]:
    """``gpuadvise analyze --json`` (pipeline.KernelAnalysis; rules_run: rules.RulesRun),
    schema_version 1."""
    from gpuadvise.toolchain.sass import source_text

    head = header_json(a)
    return {
        "schema_version": SCHEMA_VERSION,
        "kernel": head["kernel"],
        "device": head["device"],
        "toolchain": {"version": a.module.toolchain_version, "flags": list(a.module.flags)},
        "resources": head["resources"],
        "occupancy": head["occupancy"],
        "waves": head["waves"],
        "sass_lines": [
            {
                "file": m.file,
                "line": m.line,
                "space": m.space,
                "kind": m.kind,
                "width_bits": m.width_bits,
                "count": m.count,
                "opcodes": list(m.opcodes),
                "source": (source_text(m.file, m.line) or "").strip(),
            }
            for m in a.sass_lines
        ],
        # live registers along the SASS: counts per instruction, per line, the peak and the
        # values live across it (gpuadvise.model.registers; null without nvdisasm)
        "registers": None if getattr(a, "registers", None) is None else a.registers.to_dict(),
        **memory_json(a.memory),
        "findings": [] if rules_run is None else [f.to_dict() for f in rules_run.findings],
        "rules_run": [] if rules_run is None else list(rules_run.rules_run),
        # the rules that did not run, and why; "incomplete": the one line that says some were
        # skipped for a reason the user did not choose (null: the analysis is complete)
        "skipped_rules": []
        if rules_run is None
        else [s.to_dict() for s in getattr(rules_run, "skipped", ())],
        "incomplete": None if rules_run is None else getattr(rules_run, "incomplete_text", None),
        # each note once (a note repeated for every rule or CTA is one note)
        "notes": list(dict.fromkeys([*a.notes, *([] if rules_run is None else rules_run.notes)])),
        "timings_s": {**a.timings_s, "compile_cached": a.module.from_cache},
        # --time-budget: what was skipped or cut short (empty: the analysis is complete)
        "skipped": list(getattr(a, "skipped", ())),
    }


def memory_json(m: Any) -> dict[str, Any]:
    """The ``shared_memory``, ``global_memory`` and ``emulation`` sections of analyze --json."""
    if m is None:
        return {"emulation": None, "shared_memory": None, "global_memory": None, "l2": None}
    emulation = {
        "tracer": m.tracer,
        "ctas_traced": m.ctas_run,
        "total_ctas": m.total_ctas,
        "complete": m.complete,
        # long loops whose iterations were skipped (their last iteration weighted): totals are
        # estimates even when every CTA was traced
        "sampled_loops": list(getattr(m, "sampled_loops", ())),
        "lane_instructions": m.lane_instructions,
        "time_s": m.time_s,
        "error": m.error,
        "error_kind": m.error_kind,
        "notes": list(dict.fromkeys(m.notes)),
        "reconciled": [
            {"file": n.file, "line": n.line, "action": n.action, "detail": n.detail}
            for n in m.reconcile_notes
        ],
    }
    if m.banks is None:
        return {"emulation": emulation, "shared_memory": None, "global_memory": None, "l2": None}
    b, c = m.banks, m.coalescing
    shared = {
        "lines": [
            {
                "file": ln.file,
                "line": ln.line,
                "kind": ln.kind.name.lower(),
                "instructions": ln.instructions,
                "wavefronts": ln.wavefronts,
                "ideal_wavefronts": ln.ideal,
                "excess_pct": ln.excess_pct,
                "worst_ways": ln.worst_ways,
            }
            for ln in b.lines
        ],
        "total_wavefronts": b.launch.all.wavefronts,
        "total_ideal_wavefronts": b.launch.all.ideal,
        "totals": b.launch.to_dict(),
        "extrapolated": b.extrapolated,
    }
    glob = {
        "lines": [
            {
                "file": ln.file,
                "line": ln.line,
                "kind": ln.kind.name.lower(),
                "requests": ln.requests,
                "sectors": ln.sectors,
                "ideal_sectors": ln.ideal,
                "excess_pct": ln.excess_pct,
            }
            for ln in c.lines
        ],
        "totals": c.launch.to_dict(),
        "extrapolated": c.extrapolated,
    }
    l2 = None if m.l2 is None else m.l2.to_json()
    return {"emulation": emulation, "shared_memory": shared, "global_memory": glob, "l2": l2}
