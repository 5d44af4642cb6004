"""Configuration of the rules: ``[tool.gpuadvise]`` in ``pyproject.toml``, or ``gpuadvise.toml``.

Discovery: starting in the directory of the kernel's source file and walking up, the first
directory holding a ``gpuadvise.toml`` (top-level keys, or a ``[tool.gpuadvise]`` table) or a
``pyproject.toml`` with a ``[tool.gpuadvise]`` table wins (``gpuadvise.toml`` first when both are
there; a ``pyproject.toml`` without the table is passed over, as ruff does). The walk stops at the
git root (the first directory holding ``.git``), or at the filesystem root outside a repository.
``--config FILE`` skips the walk.

Keys (``-`` and ``_`` are interchangeable)::

    [tool.gpuadvise]
    select = ["GA1", "GA201"]     # rule ids by prefix (GA2 = GA200..GA299), names, or "ALL";
                                  #   default: every rule
    ignore = ["GA103"]            # same forms; the more specific of select/ignore wins
    rules-dir = ["tools/rules"]   # more rule files (relative to this file), like --rules-dir
    trace-ctas = 64               # CTAs the CPU emulator traces for the memory models and
                                  #   the rules that read them: a count, "all", or 0 for the
                                  #   first wave (the default); analyze --sample-ctas wins
    minor-speedup = 1.05          # a finding whose estimate and measurement (each where there
                                  #   is one) are at most this speedup is minor
    minor-findings = "note"       # what becomes of a minor warning: "note" (the default: it is
                                  #   reported as a note), "drop" (left out, counted in a note)
                                  #   or "keep" (a warning as the rule said)

    [tool.gpuadvise.rules.GA102]  # per-rule options, by id or name (see `gpuadvise explain`)
    min_tail_idle = 0.2
    severity = "error"            # also: override the rule's severity

On the command line, ``--select`` replaces the configuration's selection (its ignores included)
and ``--ignore`` is applied after it, as in ruff. Other keys under ``[tool.gpuadvise]`` belong to
other parts of gpuadvise and are left alone here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuadvise.errors import ConfigError
from gpuadvise.inputfiles import load_toml_file

log = logging.getLogger(__name__)

__all__ = ["Config", "config_for", "find_config", "load_config", "split_selectors"]

CONFIG_NAMES = ("gpuadvise.toml", "pyproject.toml")
DEFAULT_TRACE_CTAS: int | str | None = None  # the first wave, as analyze --sample-ctas
_OWN_KEYS = {
    "select",
    "ignore",
    "rules_dir",
    "rules_dirs",
    "trace_ctas",
    "rules",
    "minor_speedup",
    "minor_findings",
}
MINOR_FINDINGS = ("note", "drop", "keep")
DEFAULT_MINOR_SPEEDUP = 1.05


@dataclass(frozen=True)
class Config:
    """Which rules run and how. ``select`` None: every rule (before ``ignore``).

    ``cli_select``/``cli_ignore``: the command line's, applied after the file's.
    ``rule_options``: per-rule tables as written (key: rule id or name), options and ``severity``.
    ``trace_ctas``: CTAs to trace (None: the first wave). ``path``: the file read (None: none).
    ``minor_speedup``/``minor_findings``: a warning whose estimated and measured speedups are at
    most ``minor_speedup`` becomes a note (``"note"``), is left out (``"drop"``) or stays
    (``"keep"``).
    """

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    cli_select: tuple[str, ...] | None = None
    cli_ignore: tuple[str, ...] = ()
    rule_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    rules_dirs: tuple[Path, ...] = ()
    trace_ctas: int | str | None = DEFAULT_TRACE_CTAS
    path: Path | None = None
    minor_speedup: float = DEFAULT_MINOR_SPEEDUP
    minor_findings: str = "note"  # note | drop | keep

    def with_cli(
        self,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] = (),
        rules_dirs: Iterable[str | os.PathLike[str]] = (),
    ) -> Config:
        """This configuration with the command line's ``--select/--ignore/--rules-dir``."""
        sel = split_selectors(select) if select is not None else None
        return replace(
            self,
            cli_select=sel or None,
            cli_ignore=split_selectors(ignore),
            rules_dirs=self.rules_dirs + tuple(Path(d).resolve() for d in rules_dirs),
        )


def split_selectors(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """``("GA1,GA201", "GA3")`` -> ``("GA1", "GA201", "GA3")`` (comma- or space-separated)."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for v in values:
        out += [p for p in v.replace(",", " ").split() if p]
    return tuple(out)


def _git_root_reached(d: Path) -> bool:
    return (d / ".git").exists()


def _table(path: Path) -> dict[str, Any] | None:
    """The gpuadvise table of a config file (None: a pyproject.toml without one)."""
    data = load_toml_file(path, "configuration file")
    tool = data.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("gpuadvise"), dict):
        return dict(tool["gpuadvise"])
    if path.name == "pyproject.toml":
        return None
    return data


def find_config(start: str | os.PathLike[str]) -> Path | None:
    """The configuration file that applies to ``start`` (a source file or a directory)."""
    p = Path(start).resolve()
    d = p if p.is_dir() else p.parent
    while True:
        for name in CONFIG_NAMES:
            cand = d / name
            if cand.is_file() and _table(cand) is not None:
                return cand
        if _git_root_reached(d) or d.parent == d:
            return None
        d = d.parent


def _str_list(value: Any, key: str, path: Path) -> tuple[str, ...]:
    if isinstance(value, str):
        return split_selectors(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return split_selectors(value)
    raise ConfigError(f"{key} in {path} must be a list of strings", f'e.g. {key} = ["GA1"]')


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read one configuration file (``gpuadvise.toml`` or ``pyproject.toml``)."""
    p = Path(path).resolve()
    raw = _table(p)  # a missing file, a folder or a FIFO: a one-line ConfigError
    if raw is None:
        return Config(path=p)
    table = {k.replace("-", "_"): v for k, v in raw.items()}
    others = sorted(k for k in table if k not in _OWN_KEYS)
    if others:
        log.debug("%s: keys left to other parts of gpuadvise: %s", p, ", ".join(others))
    select = _str_list(table["select"], "select", p) if "select" in table else None
    ignore = _str_list(table.get("ignore", []), "ignore", p)
    dirs_raw = table.get("rules_dir", table.get("rules_dirs", []))
    dirs = tuple((p.parent / d).resolve() for d in _str_list(dirs_raw, "rules-dir", p))
    trace_ctas = table.get("trace_ctas", 0)  # 0: the first wave
    if not (
        (isinstance(trace_ctas, int) and not isinstance(trace_ctas, bool) and trace_ctas >= 0)
        or trace_ctas == "all"
    ):
        raise ConfigError(
            f'trace-ctas in {p} must be a count of CTAs, 0 (the first wave) or "all"',
            f"got {trace_ctas!r}",
        )
    minor_speedup = table.get("minor_speedup", DEFAULT_MINOR_SPEEDUP)
    if isinstance(minor_speedup, bool) or not isinstance(minor_speedup, int | float):
        raise ConfigError(
            f"minor-speedup in {p} must be a number (a speedup such as 1.05)",
            f"got {minor_speedup!r}",
        )
    if not 1.0 <= minor_speedup <= 100.0:
        raise ConfigError(
            f"minor-speedup in {p} must be between 1.0 and 100 (1.0: only findings worth nothing)",
            f"got {minor_speedup!r}",
        )
    minor_findings = table.get("minor_findings", "note")
    if minor_findings not in MINOR_FINDINGS:
        raise ConfigError(
            f"minor-findings in {p} must be one of {', '.join(MINOR_FINDINGS)}",
            f"got {minor_findings!r}",
        )
    rules = table.get("rules", {})
    if not isinstance(rules, dict) or not all(isinstance(v, dict) for v in rules.values()):
        raise ConfigError(
            f"[tool.gpuadvise.rules] in {p} must hold one table per rule",
            "e.g. [tool.gpuadvise.rules.GA102] min_tail_idle = 0.2",
        )
    return Config(
        select=select,
        ignore=ignore,
        rule_options={str(k): dict(v) for k, v in rules.items()},
        rules_dirs=dirs,
        trace_ctas=None if trace_ctas == 0 else trace_ctas,
        path=p,
        minor_speedup=float(minor_speedup),
        minor_findings=str(minor_findings),
    )


def config_for(
    source: str | os.PathLike[str] | None,
    *,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    rules_dirs: Iterable[str | os.PathLike[str]] = (),
    config_path: str | os.PathLike[str] | None = None,
) -> Config:
    """The configuration for a kernel source: the discovered (or given) file, then the command
    line's ``--select`` / ``--ignore`` / ``--rules-dir``."""
    if config_path is not None:
        base = load_config(config_path)
    else:
        found = find_config(source if source is not None else Path.cwd())
        base = load_config(found) if found is not None else Config()
    return base.with_cli(select, ignore, rules_dirs)
