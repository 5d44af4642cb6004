"""``gpuadvise record -- COMMAND``: record a program's launches (gpuadvise.record.run) and
render the summary (terminal, ``summary.md`` in the output folder, or JSON).

Exit codes: 0 the program ran and was recorded; 1 the program failed or crashed (the cases
recorded until then are written all the same); 2 bad input or no recorder (one line on stderr).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run_record(
    command: tuple[str, ...],
    kernel: str | None,
    max_per_kernel: int,
    max_snapshot_bytes: str,
    out: str | None,
    sources: tuple[str, ...],
    as_json: bool,
) -> int:
    from gpuadvise.record.run import choose_out, record
    from gpuadvise.report import record_text
    from gpuadvise.spec.units import parse_size

    limit = parse_size(max_snapshot_bytes, "--max-snapshot-bytes")
    folder = choose_out(out)
    result = record(
        list(command),
        folder,
        kernel=kernel,
        max_per_kernel=max_per_kernel,
        max_snapshot_bytes=limit,
        sources=[Path(s) for s in sources],
    )
    doc: dict[str, Any] = result.to_dict()
    record_text.write_summary(doc, folder / "summary.md")
    if as_json:
        from gpuadvise.report.json_report import emit

        emit(doc)
    else:
        from gpuadvise.report import console

        console.record_summary(doc)
    return 0 if result.exit_code == 0 and result.signal is None else 1
