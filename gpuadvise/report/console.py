"""The terminal: the only module that imports rich. Everything a user reads is drawn here."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from gpuadvise.report.output import STDOUT, ReaderGone, drop_stdout, write_stdout
from gpuadvise.report.safe_text import controls, guard, one_line
from gpuadvise.report_types import AnalysisReport, BatchReport, ReportHeader
from gpuadvise.words import counted


class SafeConsole(Console):
    """rich's Console as gpuadvise uses it, for user text (:mod:`gpuadvise.report.safe_text`):

    - no markup, no emoji codes, no highlighting, whatever the caller passes: a gate case named
      ``r3[/]`` is printed as it is (rich raised MarkupError), ``root:x:0`` keeps its ``:x:``;
    - control characters in the text are shown as escapes before rich adds its colour codes, and
      no line it writes starts with ``::`` or holds ``##[`` (GitHub workflow commands);
    - a reader that went away (``| head -1``) is
      :class:`~gpuadvise.report.output.ReaderGone`, which the CLI ends quietly on with exit code
      0 (rich's own handler exits 1).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(markup=False, emoji=False, highlight=False)
        super().__init__(*args, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # rich's one step from segments (text + style) to the string it writes or captures, before
        # the styles become escape codes: a private method, so tests/report/test_user_text.py
        # checks its effect on every rich version the tests run with
        safe = (
            seg if seg.control else Segment(controls(seg.text, keep="\n\t"), seg.style)
            for seg in buffer
        )
        return guard(super()._render_buffer(safe), "ansi")

    def on_broken_pipe(self) -> None:
        self.quiet = True
        drop_stdout()
        raise ReaderGone


# Piped output is not cut to 80 columns: tables keep their rows on one line. On a terminal,
# rich wraps prose at spaces (the terminal itself would cut it mid-word).
_TTY = sys.stdout is not None and sys.stdout.isatty()
_out = SafeConsole(
    file=STDOUT,  # type: ignore[arg-type]
    soft_wrap=not _TTY,
    width=None if _TTY else 160,
)
_err = SafeConsole(stderr=True, soft_wrap=True)

# the occupancy model's "no limit" (gpuadvise.model.occupancy.INT_MAX, CUDA's INT_MAX; a test
# checks they agree): the terminal draws the model's results and never imports the model
INT_MAX = 2**31 - 1

_LIMIT_LABELS = {
    "warps": "warps (block size)",
    "registers": "registers",
    "shared_memory": "shared memory",
    "blocks": "blocks per SM",
    "barriers": "barriers",
    "virtual_resources": "virtual resources",
}


def _n(count: int, word: str) -> str:
    from gpuadvise.report.rules_text import plural

    return plural(count, word)


def _fixes(count: int) -> str:
    from gpuadvise.report.rules_text import plural

    return plural(count, "fix", "fixes")


def error(message: str) -> None:
    """One line on stderr: ``error: what is wrong; how to fix it`` (the user text it quotes,
    paths included, with its control characters shown as escapes)."""
    _err.print(Text("error: ", style="bold red") + Text(one_line(message)))


def error_details(text: str) -> None:
    """A tool's own output below the error line (nvcc's diagnostics), line for line as it
    printed them (control characters shown as escapes, no workflow command)."""
    _err.print(Text(text), soft_wrap=True)


def note(message: str) -> None:
    _err.print(Text("note: ", style="yellow") + Text(one_line(message)))


def markdown(text: str) -> None:
    """Markdown rendered for the terminal (headings, code blocks, lists), on stdout; user text
    in it (a rule of the user's) is made safe like every other line."""
    from rich.markdown import Markdown

    md = Markdown(text, code_theme="ansi_dark", hyperlinks=False)
    if _out.is_terminal:
        _out.print(md)
        return
    with _out.capture() as cap:  # piped: wrapped at the width, no padding at the ends of lines
        _out.print(md, soft_wrap=False)
    write_stdout("".join(line.rstrip() + "\n" for line in cap.get().splitlines()))


def raw(text: str) -> None:
    """Machine-readable output (JSON ...), exactly as given: the renderer guarded it."""
    write_stdout(text if text.endswith("\n") else text + "\n")


def plain(text: str) -> None:
    """Plain text for people that quotes user text (a diff, a path) on stdout, guarded."""
    raw(guard(text, "text"))


def _bytes(n: int) -> str:
    if n >= 1024 and n % 1024 == 0:
        return f"{n} B ({n // 1024} KiB)"
    if n >= 1024:
        return f"{n} B ({n / 1024:.1f} KiB)"
    return f"{n} B"


def occupancy(
    device: Any,
    k: Any,
    carveout: int,
    r: Any,
    steps: Sequence[Any],
    notes: Sequence[str],
) -> None:
    """``gpuadvise occupancy``: the calculator's result (a DeviceSpec, KernelResources,
    OccupancyResult and Suggestions of gpuadvise.model.occupancy)."""
    head = Text()
    head.append(f"{device.name}", style="bold")
    head.append(f"  ({device.full_name}, {device.arch})\n", style="dim")
    head.append(
        f"{k.threads_per_block} threads/block, {k.regs_per_thread} registers/thread, "
        f"{k.static_smem_bytes} B static + {k.dynamic_smem_bytes} B dynamic shared memory"
        + (f", carveout {carveout}%" if carveout >= 0 else "")
    )
    _out.print(head)
    _out.print()
    pct = r.occupancy * 100
    colour = "green" if pct >= 50 else "yellow" if pct >= 25 else "red"
    summary = Text("Occupancy ")
    summary.append(f"{pct:.1f}%", style=f"bold {colour}")
    summary.append(
        f"   {r.active_blocks_per_sm} block{'s' if r.active_blocks_per_sm != 1 else ''}, "
        f"{r.active_warps_per_sm} of {r.max_warps_per_sm} warps, "
        f"{r.active_warps_per_sm * device.warp_size} threads per SM"
    )
    _out.print(summary)
    if r.active_blocks_per_sm == 0:
        _out.print(Text("No block fits on an SM: this launch would fail.", style="bold red"))

    t = Table(box=None, padding=(0, 2), show_header=True, header_style="bold")
    t.add_column("limit")
    t.add_column("blocks/SM", justify="right")
    t.add_column("")
    for name in ("warps", "registers", "shared_memory", "blocks", "barriers"):
        v = r.limits[name]
        if name == "barriers" and v >= INT_MAX:
            continue
        mark = Text("◀ limiter", style="bold red") if name in r.limiters else Text("")
        t.add_row(_LIMIT_LABELS[name], "no limit" if v >= INT_MAX else str(v), mark)
    if r.limits["virtual_resources"] < INT_MAX:
        v = r.limits["virtual_resources"]
        mark = (
            Text("◀ limiter", style="bold red") if "virtual_resources" in r.limiters else Text("")
        )
        t.add_row(_LIMIT_LABELS["virtual_resources"], str(v), mark)
    _out.print(t)
    _out.print()
    _out.print(
        f"Allocated per block: {r.allocated_regs_per_block} registers "
        f"({r.warps_per_block} warps x {r.allocated_regs_per_block // max(r.warps_per_block, 1)}), "
        f"shared memory {_bytes(r.allocated_smem_per_block)}"
        + (
            f" incl. {device.reserved_smem_per_block} B reserved"
            if device.reserved_smem_per_block
            else ""
        )
    )
    _out.print(f"Shared memory per SM for this launch: {_bytes(r.smem_per_sm_bytes)}")
    if steps:
        _out.print()
        _out.print(Text("To reach the next step", style="bold"))
        for s in steps:
            _out.print(
                Text("  • ")
                + Text(s.text)
                + Text(
                    f"  → {s.occupancy * 100:.1f}% ({s.active_warps_per_sm} warps/SM)",
                    style="green",
                )
            )
    elif r.occupancy < 1:
        _out.print()
        _out.print("No single change of registers, shared memory or block size raises occupancy.")
    for n in notes:
        _out.print(Text(f"note: {n}", style="dim"))


_BARS = " ▁▂▃▄▅▆▇█"


def sweeps(views: Sequence[Any], max_warps: int) -> None:
    """``occupancy --sweep``: each of the calculator's sweeps (model.occupancy.Sweep) as a chart."""
    titles = {
        "block_size": "Occupancy vs threads per block",
        "registers": "Occupancy vs registers per thread",
        "shared_memory": "Occupancy vs shared memory per block (bytes)",
    }
    for view in views:
        _out.print()
        _out.print(Text(titles[view.resource], style="bold"))
        _chart(view)


def _chart(view: Any, height: int = 8) -> None:
    values, occ = view.values, view.occupancy
    cur = values.index(view.current) if view.current in values else None
    for row in range(height, 0, -1):
        line = Text(f"{100 * row // height:>4}% │", style="dim")
        for i, o in enumerate(occ):
            level = o * height - (row - 1)
            ch = _BARS[max(0, min(8, round(level * 8)))] if level > 0 else " "
            line.append(ch, style="bold magenta" if i == cur else "cyan")
        _out.print(line)
    _out.print(Text("      └" + "─" * len(values), style="dim"))
    marker = Text("       ")
    if cur is not None:
        marker.append(" " * cur + "▲ ", style="bold magenta")
        marker.append(f"now: {view.current} ({occ[cur] * 100:.1f}%)", style="magenta")
    _out.print(marker)
    axis = f"       {values[0]}"
    last = str(values[-1])
    pad = max(1, len(values) - len(axis) + 7 - len(last))
    _out.print(Text(axis + " " * pad + last, style="dim"))


def devices_table(presets: Sequence[Any], live: Any) -> None:
    """``gpuadvise devices``: the presets (DeviceSpec) and the live GPU (None: none found)."""
    t = Table(box=None, padding=(0, 2), header_style="bold")
    for col in ("name", "arch", "SMs", "L2", "DRAM GB/s", "smem/SM", "full name"):
        t.add_column(
            col, justify="right" if col in {"SMs", "L2", "DRAM GB/s", "smem/SM"} else "left"
        )
    for d in presets:
        t.add_row(
            d.name,
            d.arch,
            str(d.sm_count),
            f"{(d.l2_bytes or 0) / 2**20:g} MiB",
            f"{d.mem_bandwidth_gbps:g}",
            f"{d.smem_per_sm // 1024} KiB",
            d.full_name,
        )
    _out.print(t)
    _out.print()
    if live is None:
        _out.print("Live GPU: none found (NVML reports no driver or no device).")
    else:
        _out.print(f"Live GPU: {live.full_name} ({live.arch}), modelled as {live.name}")


def _rel(path: str | None) -> str:
    if not path:
        return "?"
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:
        return one_line(path)
    return one_line(rel if not rel.startswith("..") else path)


def _header(header: ReportHeader) -> None:
    """``gpuadvise analyze``'s first lines: the kernel, its file, the launch and the device, then
    the resources, the occupancy and the waves: all known before the trace."""
    k, d = header.kernel, header.device
    head = Text()
    head.append(str(k["name"]), style="bold")
    head.append(f"  {_rel(k.get('file'))}  grid {_dim(k['grid'])} x block {_dim(k['block'])}")
    if k.get("dynamic_smem_bytes"):
        head.append(f", {k['dynamic_smem_bytes']} B dynamic shared memory")
    head.append(f"  on {d['name']} ({d['arch']})", style="dim")
    _out.print(head)
    _launch_table(header)


def _launch_table(header: ReportHeader) -> None:
    """The header's table: the kernel's resources, the occupancy (and the steps that raise it),
    the waves."""
    d, r = header.device, header.occupancy
    res = header.resources
    spills = (
        Text(
            f"spills {res['spill_store_bytes']} B stored / {res['spill_load_bytes']} B loaded",
            style="bold red",
        )
        if res["spill_store_bytes"] or res["spill_load_bytes"]
        else Text("no spills", style="green")
    )
    t = Table(box=None, padding=(0, 2), show_header=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row(
        "Resources",
        Text(
            f"{res['registers']} registers/thread, {res['static_smem_bytes']} B static shared "
            f"memory, {res['local_bytes']} B local (stack), "
        )
        + spills
        + Text(f", {res['const_bytes']} B constant, {_n(res['barriers'], 'barrier')}"),
    )
    pct = r["occupancy"] * 100
    colour = "green" if pct >= 50 else "yellow" if pct >= 25 else "red"
    blocks = r["active_blocks_per_sm"]
    occ_text = Text(f"{pct:.1f}%", style=f"bold {colour}") + Text(
        f"  {_n(blocks, 'block')}, {r['active_warps_per_sm']} of {r['max_warps_per_sm']} "
        f"warps per SM; limited by {', '.join(_LIMIT_LABELS[x] for x in r['limiters'])}"
    )
    t.add_row("Occupancy", occ_text)
    for s in r.get("next_steps") or ():
        t.add_row("", Text(f"• {s['text']} → {s['occupancy'] * 100:.1f}%", style="dim"))
    w = header.waves
    if w is not None:
        wave_text = Text(
            f"{w['total_ctas']} CTAs, {w['ctas_per_wave']} per wave ({blocks} x "
            f"{d['sm_count']} SMs): {w['waves']:.2f} waves"
        )
        if w["last_wave_ctas"]:
            style = "yellow" if w["tail_idle"] > 0.1 else ""
            wave_text.append(
                f"; the last wave is {w['last_wave_fill'] * 100:.0f}% full "
                f"({w['tail_idle'] * 100:.1f}% of SM time idle in the tail)",
                style=style,
            )
        t.add_row("Waves", wave_text)
    _out.print(t)


def _dim(value: Sequence[int]) -> str:
    """A grid or block (``[x, y, z]``) as the launch spec writes it: ``64``, ``32x8``."""
    x, y, z = (list(value) + [1, 1, 1])[:3]
    if z != 1:
        return f"{x}x{y}x{z}"
    if y != 1:
        return f"{x}x{y}"
    return str(x)


def analysis(report: AnalysisReport) -> None:
    """``gpuadvise analyze``: the static analysis, below the findings: the memory instructions
    and models per line, the live registers, the notes (the report's document; the resources,
    occupancy and waves are in the header, :func:`header_text`)."""
    from gpuadvise.report.source_lines import shown_source

    doc = report.document
    _out.print()
    _out.print(Text("Details", style="bold underline"))
    # parameter loads (constant space): noise here
    shown = [m for m in doc.get("sass_lines") or () if m["space"] != "constant"]
    if shown:
        _out.print(Text("Memory instructions per source line (SASS)", style="bold"))
        mt = Table(box=None, padding=(0, 1), header_style="bold")
        for col in ("line", "space", "kind", "width", "n", "SASS", "source"):
            mt.add_column(
                col, justify="right" if col in {"width", "n"} else "left", no_wrap=col != "source"
            )
        for m in shown:
            src = shown_source(report.source_line(m["file"], m["line"]))
            mt.add_row(
                f"{_rel(m['file']).split('/')[-1]}:{m['line']}",
                m["space"],
                m["kind"],
                f"{m['width_bits']}b",
                str(m["count"]),
                ",".join(m["opcodes"]),
                src[:70],
            )
        _out.print(mt)
    if doc.get("emulation") is not None:
        _memory(report)
    live_registers(doc.get("registers"), report.source_line)
    for n in dict.fromkeys(report.analysis_notes):  # a note repeated (per CTA, per rule): once
        _out.print(Text(f"note: {n}", style="dim"))
    skipped = doc.get("skipped") or ()
    if skipped:
        _out.print()
        _out.print(Text("Partial result: the time budget (--time-budget) ran out", style="bold"))
        for what in skipped:
            _out.print(f"  skipped: {what}")


_SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[int], width: int = 64, top: int | None = None) -> str:
    """``values`` as a line of block characters, at most ``width`` wide (each the most of the
    values it covers, so that a peak is never averaged away), scaled to ``top`` (default: the
    largest value)."""
    if not values:
        return ""
    n = len(values)
    cells = min(width, n)
    hi = top if top is not None else max(values)
    out = []
    for c in range(cells):
        chunk = values[c * n // cells : max((c + 1) * n // cells, c * n // cells + 1)]
        v = max(chunk)
        k = 0 if hi <= 0 else min(int(v / hi * (len(_SPARKS) - 1) + 0.5), len(_SPARKS) - 1)
        out.append(_SPARKS[k])
    return "".join(out)


def _site(file: str | None, line: int | None) -> str:
    return f"{_rel(file).split('/')[-1]}:{line}" if line else "?"


def live_registers(
    rp: Mapping[str, Any] | None,
    source: Callable[[str | None, int | None], str | None] = lambda f, n: None,
    values: int = 6,
) -> None:
    """The live registers along the SASS (a document's ``registers``): a sparkline, the peak and
    the values that hold it, longest first; ``source``: a source line's text (the report's)."""
    if rp is None or not rp.get("gpr"):
        return
    from gpuadvise.report.source_lines import shown_source

    _out.print()
    head = Text("Live registers", style="bold")
    site = _site(rp.get("peak_file"), rp.get("peak_line"))
    head.append(
        f"  peak {rp['peak']} of {rp['allocated']} allocated at {site}"
        f" ({_n(rp['peak_instructions'], 'instruction')}); ptxas reserves {rp['reserved']}, "
        f"{rp['slack']} more are free at the peak"
    )
    _out.print(head)
    line = Text("  ")
    line.append(sparkline(rp["gpr"], top=rp["allocated"]), style="cyan")
    line.append(f"  {len(rp['gpr'])} instructions, 0..{rp['allocated']} registers", style="dim")
    _out.print(line)
    src = shown_source(source(rp.get("peak_file"), rp.get("peak_line")))
    if src:
        _out.print(Text(f"  peak line: {src[:90]}", style="dim"))
    every = rp.get("values") or []
    shown = [v for v in every if v["kind"] not in ("stack pointer", "reserved")][:values]
    if not shown:
        return
    _out.print(Text(f"  values live across the peak ({len(shown)} longest of {len(every)}):"))
    t = Table(box=None, padding=(0, 1), header_style="bold")
    for col in ("registers", "what", "defined", "last used", "instructions", "source"):
        t.add_column(col, justify="right" if col == "instructions" else "left")
    for v in shown:
        defined = v.get("def_index") is not None
        where = _site(v.get("def_file"), v.get("def_line")) if defined else "entry"
        used = v.get("last_use_index") is not None
        idle = v.get("idle_at_peak") and v["kind"] == "loaded value"
        t.add_row(
            ",".join(v["registers"]),
            v["kind"] + (" (idle)" if idle else ""),
            where,
            _site(v.get("last_use_file"), v.get("last_use_line")) if used else "-",
            str(v["distance"]),
            shown_source(source(v.get("def_file"), v.get("def_line")))[:60],
        )
    _out.print(t)


def _memory(report: AnalysisReport) -> None:
    from gpuadvise.report.source_lines import shown_source

    doc = report.document
    m = doc["emulation"]
    _out.print()
    if m.get("error"):
        kind = m.get("error_kind")
        style = "bold red" if kind == "out_of_bounds" else "yellow"
        title = {
            "out_of_bounds": "Out-of-bounds access (CPU emulator)",
            "unsupported": "No memory models: the emulator cannot run this kernel",
            "budget": "No memory models: the emulator's instruction budget ran out",
        }.get(kind or "", "No memory models")
        _out.print(Text(title, style=style))
        _out.print(Text(f"  {m['error']}"))
        return
    scope = (
        f"all {m['total_ctas']} CTAs traced"
        if m["complete"]
        else f"{m['ctas_traced']} of {m['total_ctas']} CTAs traced (the first wave); launch "
        "totals extrapolated"
    )
    if m.get("sampled_loops"):
        scope += "; long loops sampled, counts weighted (see the notes)"
    _out.print(
        Text("Memory access models ", style="bold")
        + Text(
            f"(CPU emulator: {scope}, {m['lane_instructions']:,} lane-instructions in "
            f"{m['time_s']:.2f} s)",
            style="dim",
        )
    )
    b, c = doc["shared_memory"], doc["global_memory"]
    if b["lines"]:
        _out.print()
        _out.print(Text("Shared memory: bank conflicts per line", style="bold"))
        t = Table(box=None, padding=(0, 1), header_style="bold")
        for col in ("line", "kind", "instr", "wavefronts", "ideal", "excess", "worst", "source"):
            t.add_column(
                col,
                justify="left" if col in ("line", "kind", "source") else "right",
                no_wrap=col != "source",
            )
        for ln in b["lines"]:
            bad = ln["wavefronts"] > ln["ideal_wavefronts"] * 1.05
            worst = ln["worst_ways"]
            t.add_row(
                f"{_rel(ln['file']).split('/')[-1]}:{ln['line']}",
                ln["kind"],
                f"{ln['instructions']:,}",
                f"{ln['wavefronts']:,}",
                f"{ln['ideal_wavefronts']:,}",
                Text(f"{ln['excess_pct']:.0f}%", style="bold red" if bad else "green"),
                f"{worst:.0f}-way" if worst > 1 else "-",
                shown_source(report.source_line(ln["file"], ln["line"]))[:60],
            )
        _out.print(t)
        waves, ideal = b["total_wavefronts"], b["total_ideal_wavefronts"]
        excess = 100.0 * (waves - ideal) / waves if waves else 0.0
        _out.print(
            f"  per launch: {waves:,.0f} wavefronts, ideal {ideal:,.0f} ({excess:.1f}% excess)"
        )
    if c["lines"]:
        _out.print()
        _out.print(Text("Global memory: coalescing per line", style="bold"))
        t = Table(box=None, padding=(0, 1), header_style="bold")
        for col in ("line", "kind", "requests", "sectors", "ideal", "sect/req", "excess", "source"):
            t.add_column(
                col,
                justify="left" if col in ("line", "kind", "source") else "right",
                no_wrap=col != "source",
            )
        for ln in c["lines"]:
            bad = ln["sectors"] > ln["ideal_sectors"] * 1.05
            t.add_row(
                f"{_rel(ln['file']).split('/')[-1]}:{ln['line']}",
                ln["kind"],
                f"{ln['requests']:,}",
                f"{ln['sectors']:,}",
                f"{ln['ideal_sectors']:,}",
                f"{ln['sectors'] / max(ln['requests'], 1):.1f}",
                Text(f"{ln['excess_pct']:.0f}%", style="bold red" if bad else "green"),
                shown_source(report.source_line(ln["file"], ln["line"]))[:60],
            )
        _out.print(t)
        ld, st = c["totals"]["load"], c["totals"]["store"]
        _out.print(
            f"  per launch: loads {ld['sectors']:,.0f} sectors (ideal {ld['ideal']:,.0f}), "
            f"stores {st['sectors']:,.0f} (ideal {st['ideal']:,.0f})"
        )
    if doc.get("l2") is not None:
        _l2_table(doc["l2"])
    for n in m.get("reconciled") or ():
        _out.print(
            Text(f"note: SASS reconciliation at line {n['line']}: {n['detail']}", style="dim")
        )
    for note_text in dict.fromkeys(m.get("notes") or ()):
        _out.print(Text(f"note: {note_text}", style="dim"))


_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "note": "bold cyan"}


def _rules_count(doc: Mapping[str, Any]) -> str:
    """``20 rules run``, or ``12 of 20 rules run`` when some were skipped."""
    run = list(doc.get("rules_run") or ())
    gone = {s["rule"] for s in doc.get("skipped_rules") or ()}
    total, ran = len(run), len([r for r in run if r not in gone])
    return f"{total} rules run" if ran == total else f"{ran} of {total} rules run"


def findings(report: AnalysisReport) -> None:
    """``analyze``: the rules' findings, ranked (the words from rules_text), each line wrapped
    at the terminal's width with a hanging indent, then the rules' run's notes."""
    from gpuadvise.report.rules_text import finding_text

    _out.print()
    found = report.findings
    incomplete = report.incomplete
    if incomplete:
        _out.print(Text(incomplete, style="bold yellow"))
    if not found:
        _out.print(
            Text(
                f"No findings ({_rules_count(report.document)}).",
                style="yellow" if incomplete else "green",
            )
        )
    else:
        _out.print(Text(f"Findings, ranked ({len(found)})", style="bold underline"))
    width = _out.width
    for i, f in enumerate(found, 1):
        head, *rest = finding_text(f, i, report.speedup(i - 1))
        for part in wrap_line(head, width):
            _out.print(Text(part, style=_SEVERITY_STYLE.get(f["severity"], "")))
        for line in rest:
            body = line[3:]
            diff = body[:1] in ("+", "-") and body[:3] not in ("+++", "---")
            style = ("green" if body[:1] == "+" else "red") if diff else ""
            for part in wrap_line(line, width, code=diff or body[:1] in (" ", "@")):
                _out.print(Text(part, style=style))
    for text in dict.fromkeys(report.run_notes):
        for part in wrap_line(f"note: {text}", width):
            _out.print(Text(part, style="dim"))


def wrap_line(line: str, width: int, code: bool = False) -> list[str]:
    """``line`` cut at spaces into lines of at most ``width`` characters, never mid-word (a word
    longer than a line is the exception), with a hanging indent: prose continues under the text
    after its indent and its label (``   evidence: ...``, ``1. GA201 ...`` under the message), a
    line of a diff (``code``) four columns further in than its code. A line that fits is kept."""
    if len(line) <= width or width < 20:
        return [line]
    indent = len(line) - len(line.lstrip(" "))
    body = line[indent:]
    if code:
        rest = body[1:]
        prefix = line[: indent + 1 + len(rest) - len(rest.lstrip(" "))]
        text = rest.lstrip(" ")
        hang = len(prefix) + 4
    else:
        label = body.split(": ", 1)[0]
        prefix, text = line[:indent], body
        labelled = ": " in body and len(label) <= 24 and " " not in label.strip()
        hang = indent + len(label) + 2 if labelled else indent + 3
    hang = min(hang, width // 2)
    out: list[str] = []
    cur, first = prefix, True
    for word in text.split(" "):
        joined = cur + word if first else f"{cur} {word}"
        if not first and len(joined) > width and cur.strip():
            out.append(cur.rstrip())
            cur = " " * hang + word
        else:
            cur = joined
        first = False
    out.append(cur.rstrip())
    return out


def summary(report: AnalysisReport) -> None:
    """The report's last line: the counts, the top finding, and the command to run next."""
    from gpuadvise.report.rules_text import summary_text

    _out.print()
    for part in wrap_line(summary_text(report), _out.width):
        _out.print(Text(part, style="bold"))


def analysis_text(report: AnalysisReport) -> str:
    """The terminal report of an analysis (``analyze --format text``, ``render --format
    text``): the header (:func:`header_text`), the findings, then the details, the fixes tried
    when ``--fix``/``--diff`` ran, then one summary line; styled as this terminal prints it."""
    with _out.capture() as cap:
        findings(report)
        analysis(report)
        fixed = report.document.get("fix")
        if fixed is not None:
            fix_steps(fixed)
        summary(report)
    return header_text(report.header) + str(cap.get())


def header_text(header: ReportHeader) -> str:
    """The terminal report's header (:class:`~gpuadvise.report_types.ReportHeader`), as
    :func:`analysis_text` begins: ``analyze`` prints it as soon as it is known, before the trace,
    and the rest of :func:`analysis_text` after the analysis."""
    with _out.capture() as cap:
        _header(header)
    return str(cap.get())


def bench(r: Any) -> None:
    """``gpuadvise bench``: timings, bandwidth against the ceiling, the A/B comparison."""
    dev = r.device_info or {}
    for p in r.prepared:
        head = Text(f"{p.launch.label}  ", style="dim") if len(r.prepared) > 1 else Text()
        head.append(p.kernel_name, style="bold")
        head.append(
            f"  {_rel(str(p.spec.source))}  grid {p.spec.launch.grid} x block {p.spec.launch.block}"
        )
        if p.launch.repeat > 1:
            head.append(f"  x{p.launch.repeat} launches per sample")
        _out.print(head)
    if dev:
        _out.print(
            Text(
                f"on {dev.get('name')} (cc {dev.get('cc')}, CUDA driver {dev.get('driver')}, "
                f"{dev.get('backend')})",
                style="dim",
            )
        )
    if r.error:
        _out.print()
        _out.print(Text("The kernel failed on the GPU", style="bold red"))
        if r.cuda_error:
            _out.print(Text(f"  {r.cuda_error}", style="red"))
        _out.print(f"  {r.error}")
        tail = [ln for ln in r.worker_log.strip().splitlines() if ln.strip()][-8:]
        if tail:
            _out.print(Text("  worker output (device printf / assertions):", style="dim"))
            for ln in tail:
                _out.print(Text(f"    {ln}", style="dim"))
        for n in r.notes:
            _out.print(Text(f"note: {n}", style="dim"))
        return
    _out.print()
    t = Table(box=None, padding=(0, 2), header_style="bold")
    for col in ("", "median ms", "IQR ms", "min ms", "max ms", "n", "noise", "GB/s"):
        t.add_column(col, justify="left" if not col else "right")
    if r.flops is not None:
        t.add_column("GFLOP/s", justify="right")
    for p, st in zip(r.prepared, r.stats, strict=False):
        gbps = r.bytes_moved / (st.median_ms * 1e-3) / 1e9
        row = [
            p.launch.label if len(r.prepared) > 1 else "time",
            f"{st.median_ms:.4f}",
            f"{st.iqr_ms:.4f}",
            f"{st.min_ms:.4f}",
            f"{st.max_ms:.4f}",
            str(st.n),
            f"{st.rel_noise * 100:.2f}%",
            f"{gbps:.0f}",
        ]
        if r.flops is not None:
            row.append(f"{r.flops / (st.median_ms * 1e-3) / 1e9:.1f}")
        t.add_row(*row)
    _out.print(t)
    _out.print(
        Text(
            "cold L2: flushed before every sample" if not r.hot else "hot: back-to-back launches",
            style="dim",
        )
    )
    mb = r.bytes_moved / 1e6
    if r.ceiling_gbps:
        best = max(r.bytes_moved / (s.median_ms * 1e-3) / 1e9 for s in r.stats)
        _out.print(
            f"Memory: {mb:.1f} MB in the kernel's buffers; best {best:.0f} GB/s = "
            f"{best / r.ceiling_gbps * 100:.0f}% of the device's copy bandwidth "
            f"{r.ceiling_gbps:.0f} GB/s ({r.ceiling_source})"
        )
    else:
        _out.print(f"Memory: {mb:.1f} MB in the kernel's buffers ({r.ceiling_source})")
    if r.clocks:
        c = r.clocks
        thr = sum(s.throttled for s in r.stats)
        _out.print(
            f"Clocks: SM {c['sm_mhz_min']}..{c['sm_mhz_max']} MHz, memory "
            f"{c['mem_mhz_min']}..{c['mem_mhz_max']} MHz; "
            + (
                f"{_n(thr, 'sample')} taken while the GPU throttled"
                if thr
                else "no throttling seen"
            )
        )
    if r.speedup is not None:
        s = r.speedup
        verdict = "faster" if s.low > 1 else "slower" if s.high < 1 else "no significant change"
        _out.print()
        _out.print(
            Text("B vs A: ", style="bold")
            + Text(f"{s.speedup:.3f}x", style="bold green" if s.low > 1 else "bold")
            + Text(f" (95% CI {s.low:.3f}..{s.high:.3f}): {verdict}")
        )
    for c in r.comparisons:
        _out.print(
            Text(
                ("outputs agree: " if c.ok else "OUTPUTS DIFFER: ") + c.message,
                style="green" if c.ok else "bold red",
            )
        )
    for name, n in r.unwritten.items():
        _out.print(
            Text(
                f"warning: the kernel left {_n(n, 'element')} of {name} unwritten (still poisoned)",
                style="yellow",
            )
        )
    for n in r.notes:
        _out.print(Text(f"note: {n}", style="dim"))


def _l2_table(l2: Mapping[str, Any]) -> None:
    mb = 2**20  # MiB, as `gpuadvise devices` gives the L2
    _out.print()
    _out.print(Text("L2 under the CTA launch order (model)", style="bold"))
    fit = "fits" if l2["fits"] else "does not fit"
    _out.print(
        f"  footprint {l2['footprint_bytes'] / mb:.1f} MiB {fit} the effective L2 of "
        f"{l2['capacity_bytes'] / mb:.1f} MiB ({l2['efficiency']:.2f} x "
        f"{l2['l2_bytes'] / mb:g} MiB); {l2['concurrent_ctas']} CTAs run at once"
    )
    orders = l2["orders"]
    if len(orders) > 1 and l2["mode"] == "traced-only":
        o = next(x for x in orders if x["order"] == "row-major" and x["n"] is None)
        _out.print(
            f"  row-major (the hardware's order): predicted hit rate {o['hit_rate'] * 100:.1f}%, "
            f"DRAM reads {o['dram_bytes'] / mb:.1f} MiB; other orders are not compared: the "
            "traced CTAs do not show the per-CTA footprint (see the note; --sample-ctas all "
            "traces every CTA)"
        )
    elif len(orders) > 1:
        t = Table(box=None, padding=(0, 2), header_style="bold")
        for col in ("order", "hit rate", "DRAM reads MiB", "working set MiB", ""):
            t.add_column(col, justify="left" if col in ("order", "") else "right")
        best = l2["best"]
        for o in orders:
            label = o["order"] if o["n"] is None else f"{o['order']} N={o['n']}"
            is_best = (o["order"], o["n"]) == (best["order"], best["n"])
            t.add_row(
                label,
                f"{o['hit_rate'] * 100:.1f}%",
                f"{o['dram_bytes'] / mb:.1f}",
                f"{o['working_set_bytes'] / mb:.1f}",
                Text("◀ best" if is_best else "", style="bold green"),
            )
        _out.print(t)
    else:
        o = orders[0]
        _out.print(
            f"  predicted hit rate {o['hit_rate'] * 100:.1f}%, DRAM reads "
            f"{o['dram_bytes'] / mb:.1f} MiB"
        )
    for n in l2.get("notes") or ():
        _out.print(Text(f"  note: {n}", style="dim"))


def _speedup_text(m: Mapping[str, Any] | None) -> str:
    if m is None:
        return "-"
    ci = ""
    if m.get("ci_low") is not None and m.get("ci_high") is not None:
        ci = f" [{m['ci_low']:.2f}, {m['ci_high']:.2f}]"
    return f"{m['speedup']:.2f}x{ci}"


def fix_steps(r: Mapping[str, Any], to_stderr: bool = False) -> None:
    """``analyze --fix/--diff``: each fix tried, in order, and the combined result (the fixes'
    document: ``FixResult.to_dict``, the report's ``fix``)."""
    out = _err if to_stderr else _out
    out.print()
    out.print(Text("Fixes", style="bold"))
    steps = r.get("steps") or ()
    if not steps:
        out.print("  no fix to apply")
    else:
        t = Table(show_edge=False, pad_edge=False, box=None)
        for col in ("step", "rule", "line", "fix", "status", "speedup (95% CI)", "why"):
            t.add_column(col)
        for i, s in enumerate(steps, 1):
            style = "green" if s["status"] == "applied" else "yellow"
            t.add_row(
                str(i),
                s["rule"],
                str(s.get("line") or "-"),
                s.get("label") or s["description"][:60],
                Text(s["status"], style=style),
                _speedup_text(s.get("measurement")),
                s["reason"],
            )
        out.print(t)
    n = sum(1 for s in steps if s["status"] == "applied")
    m = r.get("combined")
    if m is not None:
        out.print(
            f"  combined: {_fixes(n)}, {_speedup_text(m)} on {m['device']} "
            f"({m['baseline_ms']:.4g} ms -> {m['variant_ms']:.4g} ms), outputs verified"
        )
    elif n:
        out.print(f"  combined: {_fixes(n)}, not measured (no GPU)")
    for line in r.get("notes") or ():
        out.print(Text("  note: ", style="yellow") + Text(line))


def fix_written(paths: Sequence[Any], dry_run: bool) -> None:
    if dry_run:
        return
    if not paths:
        _err.print("note: --fix: nothing to write")
    for p in paths:
        _err.print(f"fixed: wrote {p}")


def case_progress(total: int) -> Any:
    """A callback for each analyzed case of ``analyze FOLDER``: one line on stderr when it is a
    terminal (nothing otherwise)."""
    done = [0]

    def on_done(r: Any) -> None:
        done[0] += 1
        if not _err.is_terminal:
            return
        status = Text("error", style="red") if r.error else Text(_n(len(r.findings), "finding"))
        _err.print(
            Text(f"[{done[0]}/{total}] {r.case.id}: ") + status + Text(f" ({r.wall_s:.1f} s)")
        )

    return on_done


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1e3:.3g} us" if v < 1 else f"{v:.4g} ms"


def batch_summary(batch: BatchReport) -> None:
    """``analyze FOLDER``: the cases ranked by the time to win, then each case's errors."""
    rows = batch.summary
    _out.print(Text(f"{_n(len(rows), 'kernel case')}, ranked by the time to win", style="bold"))
    t = Table(show_edge=False, pad_edge=False, box=None)
    for col in (
        "#",
        "case",
        "kernel",
        "findings",
        "top finding",
        "kernel time",
        "best",
        "time to win",
    ):
        t.add_column(col)
    for i, r in enumerate(rows, 1):
        kernel = "-" if r.get("kernel") is None else str(r["kernel"])
        if r.get("error") is not None:
            t.add_row(str(i), r["case"], kernel, Text("error", style="red"), r["error"], "-", "-",
                      "-")  # fmt: skip
            continue
        basis = "" if r["basis"] == "measured" else " (est.)"
        top = f"{r['best_rule']} line {r['best_line']}" if r.get("best_rule") else "-"
        best = f"{r['best_speedup']:.2f}x{basis}" if r.get("best_speedup") else "-"
        kernel_ms, win_ms = r.get("kernel_ms"), r.get("time_to_win_ms")
        mark = {"estimated": " (>=)", "recorded": " (rec.)"}.get(r.get("kernel_basis") or "", "")
        kt = _ms(kernel_ms) + mark
        win = _ms(win_ms) + (basis if win_ms is not None else "")
        found: Text | str = str(r["findings"])
        if r.get("incomplete"):
            found = Text(f"{r['findings']} (incomplete)", style="yellow")
        t.add_row(str(i), r["case"], kernel, found, top, kt, best, win)
    _out.print(t)
    for r in rows:
        if r.get("incomplete"):
            _out.print(Text(f"  {r['case']}: {r['incomplete']}", style="yellow"))
    if any(r.get("kernel_basis") == "recorded" for r in rows):
        _out.print(
            "  (rec.): the kernel time is the program's GPU time in it, recorded (all its "
            "launches of that shape)"
        )
    if any(r.get("basis") == "estimated" for r in rows):
        lower = any(r.get("kernel_basis") == "estimated" for r in rows)
        _out.print(
            "  (est.): no measurement; the speedup is the rule's estimate"
            + (
                "; (>=): the kernel time is a lower bound (its buffers once at DRAM bandwidth)"
                if lower
                else ""
            )
        )
    batch_registers(batch)


def batch_registers(batch: BatchReport) -> None:
    """``analyze FOLDER``: the live registers along each kernel, one sparkline per case."""
    rows = [
        (c.case, c.report.document["registers"])
        for c in batch.cases
        if c.report is not None and c.report.document.get("registers") is not None
    ]
    if not rows:
        return
    _out.print()
    _out.print(Text("Live registers along each kernel (peak / allocated)", style="bold"))
    t = Table(box=None, padding=(0, 1), show_header=False)
    for _ in range(3):
        t.add_column(no_wrap=True)
    for case, rp in rows:
        t.add_row(case, f"{rp['peak']}/{rp['allocated']}",
                  Text(sparkline(rp["gpr"], 48, rp["allocated"]), style="cyan"))  # fmt: skip
    _out.print(t)


def batch_text(batch: BatchReport) -> str:
    """``analyze FOLDER``'s terminal report (``render --format text`` of a saved batch)."""
    with _out.capture() as cap:
        batch_summary(batch)
    return str(cap.get())


def record_summary(doc: dict[str, Any]) -> None:
    """``gpuadvise record``: the run, its kernels by GPU time, the cases and what to do next."""
    from gpuadvise.report.record_text import TOP_KERNELS, summary_lines

    for line in summary_lines(doc):
        _out.print(Text(line))
    kernels = doc.get("kernels", [])
    if kernels:
        t = Table(show_edge=False, pad_edge=False, box=None)
        for col in ("kernel", "launches", "GPU time", "cases"):
            t.add_column(col)
        for k in kernels[:TOP_KERNELS]:
            t.add_row(
                k["name"], str(k["launches"]), f"{k['gpu_time_ms']:.3f} ms", ", ".join(k["cases"])
            )
        _out.print(t)
    cases = doc.get("cases", [])
    replay = sum(1 for c in cases if c["replayable"])
    _out.print(
        Text(
            f"{counted(len(cases), 'case')} in {doc['out']}/cases ({replay} replayable); "
            f"next: gpuadvise analyze {doc['out']}"
        )
    )
    for c in cases:
        if not c["replayable"]:
            note(f"{c['id']}: " + "; ".join(n for n in c["notes"] if "not replayable" in n))
    for line in doc.get("notes", []):
        note(line)
    for e in doc.get("errors", []):
        note(f"recorder error: {e}")


def captured() -> Any:
    """A context capturing what the report prints to stdout (``with captured() as c: ...;
    c.get()``), styled as it would be printed here: for the analysis-result cache."""
    return _out.capture()


def output_settings() -> dict[str, Any]:
    """What the terminal report's look depends on: width, colours, whether stdout is a terminal."""
    return {"width": _out.width, "color": _out.color_system, "terminal": _out.is_terminal}
