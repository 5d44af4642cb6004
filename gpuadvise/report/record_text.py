"""``gpuadvise record``'s summary for people: the terminal and ``summary.md`` in the output
folder, both from the ``summary.json`` document (:meth:`gpuadvise.record.run.RecordResult.to_dict`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuadvise.report.markdown import md_escape, md_table
from gpuadvise.report.safe_text import guard
from gpuadvise.words import counted

__all__ = ["TOP_KERNELS", "summary_lines", "summary_markdown", "write_summary"]

TOP_KERNELS = 20


def _status(doc: dict[str, Any]) -> str:
    if doc.get("signal"):
        return f"crashed (signal {doc['signal']}); what was recorded until then is kept"
    code = doc.get("exit_code", 0)
    return "exited 0" if code == 0 else f"exited {code}; what was recorded is kept"


def _overhead(doc: dict[str, Any]) -> str:
    o = doc.get("overhead", {})
    return (
        f"{o.get('callback_s', 0.0):.3f} s in the recorder ({100 * o.get('fraction_of_wall', 0):.1f}%"
        f" of the program's {doc.get('wall_s', 0.0):.2f} s), {counted(doc.get('snapshots', 0), 'snapshot')}, "
        f"{doc.get('snapshot_bytes', 0) / 2**20:.1f} MiB copied"
    )


def _shape(c: dict[str, Any]) -> str:
    g = "x".join(str(v) for v in c["grid"])
    b = "x".join(str(v) for v in c["block"])
    smem = f", {c['dynamic_smem_bytes']} B smem" if c.get("dynamic_smem_bytes") else ""
    return f"<<<{g}, {b}{smem}>>>"


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """The summary as plain lines (the terminal prints them, summary.md quotes them)."""
    out = [
        f"recorded: {' '.join(doc['command'])}",
        f"  program: {_status(doc)}; {counted(doc['launches'], 'launch', 'launches')} in "
        f"{counted(doc['processes'], 'process', 'processes')}",
        f"  overhead: {_overhead(doc)}",
    ]
    if doc.get("unfinished_processes"):
        out.append(
            f"  {counted(doc['unfinished_processes'], 'process', 'processes')} ended without the "
            "recorder's exit hook (a crash, or an exit that skips atexit: os._exit, a forked "
            "child; CuPy starts one): their launches until then are kept, their GPU times may "
            "be missing"
        )
    return out


def summary_markdown(doc: dict[str, Any]) -> str:
    parts = ["# gpuadvise record", ""]
    parts += [md_escape(line) + "  " for line in summary_lines(doc)]
    parts += ["", "## Kernels by GPU time", ""]
    kernels = doc.get("kernels", [])[:TOP_KERNELS]
    parts.append(
        md_table(
            ["kernel", "launches", "GPU time (ms)", "cases"],
            [
                [k["name"], str(k["launches"]), f"{k['gpu_time_ms']:.3f}", ", ".join(k["cases"])]
                for k in kernels
            ],
            ["l", "r", "r", "l"],
        )
    )
    parts += ["## Cases", ""]
    parts.append(
        md_table(
            ["case", "kernel", "launch", "launches", "GPU time (ms)", "replayable", "notes"],
            [
                [
                    c["id"],
                    c["name"],
                    _shape(c),
                    str(c["launches"]),
                    f"{c['gpu_time_ms']:.3f}",
                    "yes" if c["replayable"] else "no",
                    "; ".join(c["notes"]),
                ]
                for c in doc.get("cases", [])
            ],
            ["l", "l", "l", "r", "r", "l", "l"],
        )
    )
    parts += ["", f"Next: `gpuadvise analyze {md_escape(doc['out'])}`", ""]
    for e in doc.get("errors", []):
        parts.append(f"- recorder error: {md_escape(e)}")
    return guard("\n".join(parts) + "\n", "markdown")


def write_summary(doc: dict[str, Any], path: Path) -> None:
    from gpuadvise.fileio import write_atomic

    write_atomic(path, summary_markdown(doc))
