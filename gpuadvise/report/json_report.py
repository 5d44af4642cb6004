"""JSON documents (schema_version 1). The schemas are documented in the README. ``analyze``'s
document is built with the report (:mod:`gpuadvise.analyze.report`); this module writes them."""

from __future__ import annotations

import json
from typing import Any

from gpuadvise.report_types import SCHEMA_VERSION, AnalysisReport

__all__ = ["SCHEMA_VERSION", "analysis_json", "bench_json", "dumps", "emit", "saved_report"]


def dumps(doc: dict[str, Any], *, ensure_ascii: bool = True) -> str:
    """The one JSON writer of reports, guarded (:func:`gpuadvise.report.safe_text.guard`: a
    parser reads back the same values)."""
    from gpuadvise.report.safe_text import guard

    return guard(json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=ensure_ascii), "json")


def emit(doc: dict[str, Any]) -> None:
    """Write a JSON document to stdout (without importing rich: JSON runs start faster)."""
    from gpuadvise.report.output import write_stdout

    write_stdout(dumps(doc) + "\n")


def bench_json(r: Any) -> dict[str, Any]:
    """``gpuadvise bench --json`` (bench_cmd.BenchReport), schema_version 1."""
    kernels = []
    for i, p in enumerate(r.prepared):
        st = r.stats[i] if i < len(r.stats) else None
        entry: dict[str, Any] = {
            "label": p.launch.label,
            "name": p.kernel_name,
            "file": str(p.spec.source),
            "grid": list(p.launch.grid),
            "block": list(p.launch.block),
            "dynamic_smem_bytes": p.launch.dynamic_smem_bytes,
            "repeat": p.launch.repeat,
            "timing": None if st is None else st.to_dict(),
        }
        if st is not None and st.median_ms > 0:
            entry["achieved_gbps"] = r.bytes_moved / (st.median_ms * 1e-3) / 1e9
            entry["gflops"] = None if r.flops is None else r.flops / (st.median_ms * 1e-3) / 1e9
        kernels.append(entry)
    return {
        "schema_version": SCHEMA_VERSION,
        "device": r.device_info,
        "kernels": kernels,
        "bytes_in_buffers": r.bytes_moved,
        "ceiling_gbps": r.ceiling_gbps,
        "ceiling_source": r.ceiling_source,
        "cold_l2": not r.hot,
        "clocks": r.clocks,
        "speedup": None if r.speedup is None else r.speedup.to_dict(),
        "outputs_agree": None if not r.comparisons else all(c.ok for c in r.comparisons),
        "comparisons": [c.to_dict() for c in r.comparisons],
        "unwritten": r.unwritten,
        "error": r.error,
        "cuda_error": r.cuda_error,
        "notes": r.notes,
    }


def analysis_json(report: AnalysisReport) -> str:
    """``analyze --format json``: the analysis's document (schema_version 1)."""
    return dumps(dict(report.document))


def saved_report(report: AnalysisReport) -> str:
    """``analyze --format report``: the whole report (``gpuadvise render`` reads it back)."""
    return dumps(report.to_dict())
