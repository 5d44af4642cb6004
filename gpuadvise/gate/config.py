"""The gate configuration: the ``[gate]`` table of gpuadvise.toml (or ``[tool.gpuadvise.gate]`` of
pyproject.toml), its cases, where it is found, and checking every key of it.

Paths in the file are relative to its folder; the parsed :class:`GateConfig` holds absolute ones.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.errors import ConfigError, UsageError
from gpuadvise.gate.thresholds import METRICS, Threshold
from gpuadvise.inputfiles import load_toml_file

if TYPE_CHECKING:
    from gpuadvise.spec.kernel_spec import KernelSpec

__all__ = [
    "DEFAULT_BASELINE",
    "GateCase",
    "GateConfig",
    "TimingSettings",
    "find_gate_config",
    "load_gate_config",
    "parse_gate_config",
    "rebase_case",
]

DEFAULT_BASELINE = ".gpuadvise/gate-baseline.json"


@dataclass(frozen=True)
class TimingSettings:
    """The statistics of timed gates: significance level and the minimum samples per side."""

    alpha: float = 0.01
    min_samples: int = 10


@dataclass(frozen=True)
class GateCase:
    """One kernel run to gate. Paths are absolute. ``args``/``buffers`` are in the CLI's
    ``name=value`` form (:func:`~gpuadvise.spec.kernel_spec.parse_arg`,
    :func:`~gpuadvise.spec.kernel_spec.parse_buffer`)."""

    name: str
    source: Path | None = None
    kernel: str | None = None
    spec: Path | None = None
    grid: str | None = None
    block: str | None = None
    dynamic_smem: str | None = None
    args: tuple[str, ...] = ()
    buffers: tuple[str, ...] = ()
    nvcc_flags: tuple[str, ...] = ()
    metrics: tuple[str, ...] = tuple(METRICS)
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    gpu: str | None = None
    arch: str | None = None
    root: Path | None = None  # its repository: no compiler output quotes a file outside it
    trusted: bool = False  # --trust-config: it may read files outside the repository

    def threshold(self, metric: str) -> Threshold:
        return self.thresholds.get(metric) or METRICS[metric].default

    def kernel_spec(self) -> KernelSpec:
        """The :class:`~gpuadvise.spec.kernel_spec.KernelSpec` of this case (reads the spec and source)."""
        from gpuadvise.spec.kernel_spec import build_kernel_spec

        return build_kernel_spec(
            self.source,
            self.kernel,
            spec=self.spec,
            grid=self.grid,
            block=self.block,
            dynamic_smem=self.dynamic_smem,
            args=self.args,
            buffers=self.buffers,
            nvcc_flags=self.nvcc_flags,
        )

    def paths(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.source, self.spec) if p is not None)


@dataclass(frozen=True)
class GateConfig:
    """The ``[gate]`` table: where it came from, the baseline file and the cases."""

    path: Path
    root: Path
    cases: tuple[GateCase, ...]
    baseline: Path
    metrics: tuple[str, ...] = tuple(METRICS)
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    timing: TimingSettings = TimingSettings()
    gpu: str | None = None
    arch: str | None = None

    def select(self, names: Sequence[str]) -> GateConfig:
        """Only the cases named (``--case``); an unknown name is a UsageError."""
        if not names:
            return self
        known = {c.name: c for c in self.cases}
        for n in names:
            if n not in known:
                raise UsageError(
                    f"no gate case named {n!r} in {self.path}",
                    _did_you_mean(n, known) or "cases: " + ", ".join(known),
                )
        return replace(self, cases=tuple(c for c in self.cases if c.name in set(names)))

    def with_device(self, gpu: str | None, arch: str | None) -> GateConfig:
        """``--gpu``/``--arch`` from the command line override the file's (for every case)."""
        if gpu is None and arch is None:
            return self
        cases = tuple(replace(c, gpu=gpu, arch=arch) for c in self.cases)
        return replace(self, gpu=gpu, arch=arch, cases=cases)


_GATE_KEYS = ("baseline", "metrics", "thresholds", "timing", "gpu", "arch", "cases")
_CASE_KEYS = (
    "name",
    "source",
    "kernel",
    "spec",
    "grid",
    "block",
    "dynamic_smem",
    "args",
    "buffers",
    "nvcc_flags",
    "metrics",
    "thresholds",
)
_TIMING_KEYS = ("alpha", "min_samples")
_THRESHOLD_KEYS = ("abs", "rel")
_PCT_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*")


def _did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _check_keys(table: Mapping[str, Any], allowed: Sequence[str], where: str, file: Path) -> None:
    for key in table:
        if key not in allowed:
            hint = _did_you_mean(key, allowed)
            raise ConfigError(
                f"{file}: unknown key {where}.{key} in the gate configuration",
                (hint + " " if hint else "") + "known keys: " + ", ".join(allowed),
            )


def _str(value: Any, where: str, file: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            f"{file}: {where} must be a non-empty string (got {value!r})",
            f'write {where.rsplit(".", 1)[-1]} = "..." with a value in the quotes',
        )
    return value


def _launch_text(value: Any, where: str, file: Path) -> str:
    """grid/block/dynamic_smem: a string, an integer, or a list of integers (as in specs)."""
    if isinstance(value, bool):
        raise ConfigError(f"{file}: {where} must be a string or a number", 'e.g. "256"')
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list) and value and all(isinstance(v, int | str) for v in value):
        return ",".join(str(v) for v in value)
    return _str(value, where, file)


def _str_list(value: Any, where: str, file: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"{file}: {where} must be a list of strings (got {value!r})",
            f'write {where.rsplit(".", 1)[-1]} = ["...", "..."], each item in quotes',
        )
    return tuple(value)


def _metric_list(value: Any, where: str, file: Path) -> tuple[str, ...]:
    names = _str_list(value, where, file)
    if not names:
        raise ConfigError(f"{file}: {where} is empty", "list at least one metric")
    for n in names:
        if n not in METRICS:
            hint = _did_you_mean(n, METRICS)
            raise ConfigError(
                f"{file}: {where} names an unknown metric {n!r}",
                (hint + " " if hint else "") + "metrics: " + ", ".join(METRICS),
            )
    return tuple(dict.fromkeys(names))


def _bound(value: Any, where: str, file: Path, *, allow_pct: bool) -> float:
    if isinstance(value, str) and allow_pct:
        m = _PCT_RE.fullmatch(value)
        if m:
            return float(m.group(1)) / 100.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"{file}: {where} must be a number" + (' or a percentage ("5%")' if allow_pct else ""),
            f"got {value!r}",
        )
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(
            f"{file}: {where} must be finite and >= 0 (got {value})", "give 0 or a positive number"
        )
    return float(value)


def _threshold(value: Any, where: str, file: Path) -> Threshold:
    """``8`` (abs), ``"10%"`` (rel) or ``{abs = 8, rel = 0.1}`` / ``{rel = "10%"}``."""
    if isinstance(value, str):
        return Threshold(rel=_bound(value, where, file, allow_pct=True))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Threshold(abs=_bound(value, where, file, allow_pct=False))
    if isinstance(value, dict):
        _check_keys(value, _THRESHOLD_KEYS, where, file)
        if not value:
            raise ConfigError(f"{file}: {where} is empty", "give abs, rel or both")
        a = value.get("abs")
        r = value.get("rel")
        return Threshold(
            None if a is None else _bound(a, f"{where}.abs", file, allow_pct=False),
            None if r is None else _bound(r, f"{where}.rel", file, allow_pct=True),
        )
    raise ConfigError(
        f"{file}: {where} must be a number (absolute), a percentage or a table {{abs, rel}}",
        f"got {value!r}",
    )


def _thresholds(value: Any, where: str, file: Path) -> dict[str, Threshold]:
    if not isinstance(value, dict):
        raise ConfigError(f"{file}: {where} must be a table", "e.g. registers = { rel = 0.1 }")
    _check_keys(value, tuple(METRICS), where, file)
    return {k: _threshold(v, f"{where}.{k}", file) for k, v in value.items()}


def _kv_list(value: Any, where: str, file: Path) -> tuple[str, ...]:
    """``[args]``/``[buffers]`` tables as the CLI's ``name=value`` strings."""
    if not isinstance(value, dict):
        raise ConfigError(f"{file}: {where} must be a table", "e.g. { n = 4194304 }")
    out = []
    for k, v in value.items():
        if isinstance(v, bool):
            text = "true" if v else "false"
        elif isinstance(v, int | float | str):
            text = str(v)
        else:
            raise ConfigError(
                f"{file}: {where}.{k} must be a number, true/false or a string", f"got {v!r}"
            )
        out.append(f"{k}={text}")
    return tuple(out)


def _path(value: Any, where: str, file: Path, base: Path, *, resolve: bool = True) -> Path:
    text = _str(value, where, file)
    if "\0" in text:
        raise ConfigError(f"{file}: {where} {text!r} holds a NUL byte", "check the path")
    p = Path(text).expanduser()
    p = p if p.is_absolute() else base / p
    return p.resolve() if resolve else p


def _kernel_base(kernel: str) -> str:
    return kernel.split("<", 1)[0].strip().rsplit("::", 1)[-1]


def parse_gate_config(table: Mapping[str, Any], *, path: Path, prefix: str = "gate") -> GateConfig:
    """Check and normalise a ``[gate]`` table read from ``path`` (paths relative to its folder).

    ``prefix`` (``gate`` or ``tool.gpuadvise.gate``) names the table in error messages.
    """
    file = path
    base = path.parent.resolve()
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"{file}: {prefix} must be a table", f"write [{prefix}] and its keys below it"
        )
    _check_keys(table, _GATE_KEYS, prefix, file)
    metrics = (
        _metric_list(table["metrics"], f"{prefix}.metrics", file)
        if "metrics" in table
        else tuple(METRICS)
    )
    thresholds = (
        _thresholds(table["thresholds"], f"{prefix}.thresholds", file)
        if "thresholds" in table
        else {}
    )
    timing = TimingSettings()
    if "timing" in table:
        t = table["timing"]
        if not isinstance(t, dict):
            raise ConfigError(f"{file}: {prefix}.timing must be a table", "e.g. alpha = 0.01")
        _check_keys(t, _TIMING_KEYS, f"{prefix}.timing", file)
        alpha = t.get("alpha", timing.alpha)
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 0.5:
            raise ConfigError(
                f"{file}: {prefix}.timing.alpha must be between 0 and 0.5 (got {alpha!r})",
                "e.g. 0.01",
            )
        n = t.get("min_samples", timing.min_samples)
        if isinstance(n, bool) or not isinstance(n, int) or n < 3:
            raise ConfigError(
                f"{file}: {prefix}.timing.min_samples must be an integer >= 3 (got {n!r})",
                "e.g. 10",
            )
        timing = TimingSettings(float(alpha), n)
    gpu = _str(table["gpu"], f"{prefix}.gpu", file) if "gpu" in table else None
    arch = _str(table["arch"], f"{prefix}.arch", file) if "arch" in table else None
    # links kept: the gate refuses a baseline that leads out of the repository or is a link
    baseline = _path(
        table.get("baseline", DEFAULT_BASELINE), f"{prefix}.baseline", file, base, resolve=False
    )

    raw_cases = table.get("cases")
    if raw_cases is None:
        raise ConfigError(
            f"{file}: {prefix} has no cases",
            f"add [[{prefix}.cases]] tables with source, kernel and launch (or spec)",
        )
    if not isinstance(raw_cases, list) or not all(isinstance(c, dict) for c in raw_cases):
        raise ConfigError(
            f"{file}: {prefix}.cases must be an array of tables", f"write [[{prefix}.cases]]"
        )
    cases: list[GateCase] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_cases):
        where = f"{prefix}.cases[{i}]"
        _check_keys(raw, _CASE_KEYS, where, file)
        source = _path(raw["source"], f"{where}.source", file, base) if "source" in raw else None
        spec = _path(raw["spec"], f"{where}.spec", file, base) if "spec" in raw else None
        if source is None and spec is None:
            raise ConfigError(
                f"{file}: {where} has neither source nor spec",
                'give source = "path/to/kernel.cu" (and kernel, grid, block) or spec',
            )
        kernel = _str(raw["kernel"], f"{where}.kernel", file) if "kernel" in raw else None
        if "name" in raw:
            name = _str(raw["name"], f"{where}.name", file)
        elif kernel:
            name = _kernel_base(kernel)
        elif source is not None:
            name = source.stem
        else:  # a spec: kernels/transpose/case.toml is "transpose"
            assert spec is not None
            name = spec.parent.name if spec.stem == "case" else spec.stem
        if name in seen:
            raise ConfigError(
                f"{file}: two gate cases are named {name!r}",
                'give each case a distinct name = "..."',
            )
        seen.add(name)
        case_thresholds = dict(thresholds)
        if "thresholds" in raw:
            case_thresholds.update(_thresholds(raw["thresholds"], f"{where}.thresholds", file))
        cases.append(
            GateCase(
                name=name,
                source=source,
                kernel=kernel,
                spec=spec,
                grid=_launch_text(raw["grid"], f"{where}.grid", file) if "grid" in raw else None,
                block=(
                    _launch_text(raw["block"], f"{where}.block", file) if "block" in raw else None
                ),
                dynamic_smem=(
                    _launch_text(raw["dynamic_smem"], f"{where}.dynamic_smem", file)
                    if "dynamic_smem" in raw
                    else None
                ),
                args=_kv_list(raw["args"], f"{where}.args", file) if "args" in raw else (),
                buffers=(
                    _kv_list(raw["buffers"], f"{where}.buffers", file) if "buffers" in raw else ()
                ),
                nvcc_flags=(
                    _str_list(raw["nvcc_flags"], f"{where}.nvcc_flags", file)
                    if "nvcc_flags" in raw
                    else ()
                ),
                metrics=(
                    _metric_list(raw["metrics"], f"{where}.metrics", file)
                    if "metrics" in raw
                    else metrics
                ),
                thresholds=case_thresholds,
                gpu=gpu,
                arch=arch,
            )
        )
    if not cases:
        raise ConfigError(f"{file}: {prefix}.cases is empty", "add at least one case")
    return GateConfig(
        path=path,
        root=base,
        cases=tuple(cases),
        baseline=baseline,
        metrics=metrics,
        thresholds=thresholds,
        timing=timing,
        gpu=gpu,
        arch=arch,
    )


def _read_toml(path: Path) -> dict[str, Any]:
    return load_toml_file(path, "config file", missing_hint="check the --config path")


def _gate_table(path: Path, data: Mapping[str, Any]) -> tuple[Any, str] | None:
    """The gate table of a parsed file and its dotted name, or None when it has none."""
    if path.name == "pyproject.toml":
        tool = data.get("tool")
        gpa = tool.get("gpuadvise") if isinstance(tool, dict) else None
        if isinstance(gpa, dict) and "gate" in gpa:
            return gpa["gate"], "tool.gpuadvise.gate"
        return None
    if "gate" in data:
        return data["gate"], "gate"
    return None


def has_gate_table(path: Path) -> bool:
    """Whether ``path`` (gpuadvise.toml or pyproject.toml) holds a gate table (False when it
    cannot be read: the caller that loads it reports why)."""
    try:
        return _gate_table(path, _read_toml(path)) is not None
    except ConfigError:
        return False


def find_gate_config(start: Path) -> Path | None:
    """Walk up from ``start``: in each folder ``gpuadvise.toml`` with ``[gate]``, then
    ``pyproject.toml`` with ``[tool.gpuadvise.gate]``. The first match wins; None if none.

    The walk stops at the root of the git repository holding ``start`` (a folder with
    ``.git``), so that a configuration above the repository (in a home folder) is never used.
    """
    here = start.resolve()
    for folder in (here, *here.parents):
        for name in ("gpuadvise.toml", "pyproject.toml"):
            candidate = folder / name
            if candidate.is_file() and _gate_table(candidate, _read_toml(candidate)) is not None:
                return candidate
        if (folder / ".git").exists():
            break
    return None


def load_gate_config(path: Path | None = None, *, start: Path | None = None) -> GateConfig:
    """Read the gate configuration: ``path`` (``--config``), else the one found from ``start``
    (default: the current directory) upwards."""
    if path is None:
        found = find_gate_config(start or Path.cwd())
        if found is None:
            raise ConfigError(
                f"no gate configuration found in {start or Path.cwd()} or above "
                "(looked for [gate] in gpuadvise.toml and [tool.gpuadvise.gate] in pyproject.toml)",
                "add one (see docs/ci-example.md) or pass --config FILE",
            )
        path = found
    path = Path(path)
    data = _read_toml(path)
    got = _gate_table(path, data)
    if got is None:
        wanted = "[tool.gpuadvise.gate]" if path.name == "pyproject.toml" else "[gate]"
        raise ConfigError(f"{path} has no {wanted} table", "add one (see docs/ci-example.md)")
    table, prefix = got
    return parse_gate_config(table, path=path.resolve(), prefix=prefix)


def rebase_case(case: GateCase, old_root: Path, new_root: Path) -> GateCase:
    """``case`` with its paths under ``old_root`` moved under ``new_root`` (a checkout of the
    baseline revision). Paths outside ``old_root`` are kept: they are not versioned with it."""
    old = old_root.resolve()

    def move(p: Path | None) -> Path | None:
        if p is None:
            return None
        try:
            return new_root / p.resolve().relative_to(old)
        except ValueError:
            return p

    root = None if case.root is None else new_root
    return replace(case, source=move(case.source), spec=move(case.spec), root=root)
