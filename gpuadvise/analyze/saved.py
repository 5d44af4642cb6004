"""An analysis as data: what the reports render of a :class:`KernelAnalysis` and its
:class:`~gpuadvise.rules.engine.RulesRun`, written as JSON and read back checked.

The analysis-result cache stores this data, never a rendering: every output format and the exit
code (``--fail-on``) are derived from it again on each run, so that a cache entry written by
someone else cannot make ``analyze`` print text or exit with a code of its choosing. Reading is
strict: a field of the wrong type, a missing field, an unknown enum member, a value a record
refuses is a ``ValueError`` (the cache then counts a miss). What the renderers do not read is not
kept: the trace, the PTX, the SASS instructions, the compile options.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuadvise.analyze.models import MemoryAnalysis
from gpuadvise.analyze.pipeline import KernelAnalysis
from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import GpuAdviseError
from gpuadvise.model.banks import BankResult
from gpuadvise.model.coalescing import CoalescingResult
from gpuadvise.model.l2.results import L2Result
from gpuadvise.model.occupancy import KernelResources, OccupancyResult, Suggestion
from gpuadvise.model.reconcile import ReconcileNote
from gpuadvise.model.registers import RegisterPressure
from gpuadvise.model.waves import Waves
from gpuadvise.rules.engine import Finding, RulesRun, SkippedRule
from gpuadvise.spec.kernel_spec import KernelSpec
from gpuadvise.toolchain import CompiledModule, KernelInfo
from gpuadvise.toolchain.sass import SassMemLine

__all__ = ["SAVED_FORMAT", "analysis_from_data", "analysis_to_data"]

SAVED_FORMAT = 2
"""Bumped whenever what is saved changes shape (2: the live registers and the skipped rules)."""

# Errors a record's own from_dict raises on data it does not take.
_BAD = (
    ValueError,
    TypeError,
    LookupError,
    AttributeError,
    ArithmeticError,
    StopIteration,
    GpuAdviseError,
)


def analysis_to_data(analysis: KernelAnalysis, rules: RulesRun) -> dict[str, Any]:
    """The data of ``analysis`` and ``rules`` that the reports render (JSON-safe)."""
    module = analysis.module
    kept_module = dataclasses.replace(
        module, ptx="", kernels=(analysis.kernel,), dependencies=(), aliases=(), log=""
    )
    return {
        "format": SAVED_FORMAT,
        "spec": analysis.spec.to_dict(),
        "device": _plain(analysis.device),
        "module": kept_module.to_dict(),
        "kernel": analysis.kernel.to_dict(),
        "occupancy_input": _plain(analysis.occupancy_input),
        "occupancy": _plain(analysis.occupancy),
        "next_steps": [_plain(s) for s in analysis.next_steps],
        "waves": None if analysis.waves is None else _plain(analysis.waves),
        "sass_lines": [m.to_dict() for m in analysis.sass_lines],
        "sass_instruction_count": analysis.sass_instruction_count,
        "timings_s": dict(analysis.timings_s),
        "notes": list(analysis.notes),
        "memory": None if analysis.memory is None else _memory_to_data(analysis.memory),
        "models": sorted(analysis.models),
        "skipped": list(analysis.skipped),
        "registers": None if analysis.registers is None else _plain(analysis.registers),
        "rules": rules.to_dict(),
    }


def analysis_from_data(data: Any) -> tuple[KernelAnalysis, RulesRun]:
    """The analysis and rules' run :func:`analysis_to_data` wrote; ``ValueError`` for anything
    else (the wrong format, shape, type or value anywhere)."""
    try:
        return _from_data(data)
    except _BAD as exc:
        raise ValueError(f"not a saved analysis: {exc}") from None
    except RecursionError:
        raise ValueError("not a saved analysis: nested too deep") from None


def _from_data(data: Any) -> tuple[KernelAnalysis, RulesRun]:
    doc = _typed(dict[str, Any], data, "analysis")
    if doc.get("format") != SAVED_FORMAT:
        raise ValueError(f"format {doc.get('format')!r}, not {SAVED_FORMAT}")
    kernel = KernelInfo.from_dict(_typed(dict[str, Any], doc["kernel"], "kernel"))
    module = CompiledModule.from_dict(_typed(dict[str, Any], doc["module"], "module"))
    memory = doc["memory"]
    analysis = KernelAnalysis(
        spec=KernelSpec.from_dict(_typed(dict[str, Any], doc["spec"], "spec")),
        device=_typed(DeviceSpec, doc["device"], "device"),
        module=module,
        kernel=kernel,
        occupancy_input=_typed(KernelResources, doc["occupancy_input"], "occupancy_input"),
        occupancy=_typed(OccupancyResult, doc["occupancy"], "occupancy"),
        next_steps=_typed(tuple[Suggestion, ...], doc["next_steps"], "next_steps"),
        waves=_typed(Waves | None, doc["waves"], "waves"),
        sass_lines=tuple(
            SassMemLine.from_dict(_typed(dict[str, Any], m, "sass_lines[]"))
            for m in _typed(list[Any], doc["sass_lines"], "sass_lines")
        ),
        sass_instruction_count=_typed(int, doc["sass_instruction_count"], "sass_instruction_count"),
        timings_s=_typed(dict[str, float], doc["timings_s"], "timings_s"),
        notes=_typed(tuple[str, ...], doc["notes"], "notes"),
        memory=None if memory is None else _memory_from_data(memory),
        models=frozenset(_typed(tuple[str, ...], doc["models"], "models")),
        skipped=_typed(tuple[str, ...], doc["skipped"], "skipped"),
        registers=_typed(RegisterPressure | None, doc["registers"], "registers"),
    )
    _check_records(analysis)
    raw = _typed(dict[str, Any], doc["rules"], "rules")
    rules = RulesRun(
        findings=tuple(
            Finding.from_dict(_typed(dict[str, Any], f, "finding"))
            for f in _typed(list[Any], raw["findings"], "findings")
        ),
        rules_run=_typed(tuple[str, ...], raw["rules_run"], "rules_run"),
        notes=_typed(tuple[str, ...], raw["notes"], "rules notes"),
        skipped=_typed(tuple[SkippedRule, ...], raw["skipped_rules"], "skipped_rules"),
    )
    for f in rules.findings:
        _check_finding(f)
    return analysis, rules


# MemoryAnalysis's plain fields and their types (its other fields are models, or not kept)
_MEMORY_SCALARS: dict[str, Any] = {
    "ctas_run": int,
    "total_ctas": int,
    "complete": bool,
    "lane_instructions": int,
    "time_s": float,
    "notes": tuple[str, ...],
    "error": str | None,
    "error_kind": str | None,
    "tracer": str,
    "l2_unavailable": str | None,
    "l2_probe_ctas": int | None,
}


def _memory_to_data(m: MemoryAnalysis) -> dict[str, Any]:
    out: dict[str, Any] = {name: _json_value(getattr(m, name)) for name in _MEMORY_SCALARS}
    out["banks"] = None if m.banks is None else m.banks.to_dict()
    out["coalescing"] = None if m.coalescing is None else m.coalescing.to_dict()
    out["reconcile_notes"] = [n.to_dict() for n in m.reconcile_notes]
    out["l2"] = None if m.l2 is None else m.l2.to_json()
    return out


def _memory_from_data(data: Any) -> MemoryAnalysis:
    doc = _typed(dict[str, Any], data, "memory")
    scalars = {
        name: _typed(tp, doc[name], f"memory.{name}") for name, tp in _MEMORY_SCALARS.items()
    }
    banks, coal, l2 = doc["banks"], doc["coalescing"], doc["l2"]
    return MemoryAnalysis(
        **scalars,
        banks=None if banks is None else BankResult.from_dict(_typed(dict[str, Any], banks, "b")),
        coalescing=None
        if coal is None
        else CoalescingResult.from_dict(_typed(dict[str, Any], coal, "coalescing")),
        reconcile_notes=tuple(
            ReconcileNote.from_dict(_typed(dict[str, Any], n, "reconcile note"))
            for n in _typed(list[Any], doc["reconcile_notes"], "reconcile_notes")
        ),
        l2=None if l2 is None else L2Result.from_json(_typed(dict[str, Any], l2, "l2")),
    )


def _check_records(a: KernelAnalysis) -> None:
    """The records read by their own ``from_dict`` hold the types the renderers format."""
    for m in a.sass_lines:
        _check_fields(m, SassMemLine)
    mem = a.memory
    if mem is not None:
        for result in (mem.banks, mem.coalescing):
            if result is not None:
                for line in result.lines:
                    if line.file is not None and not isinstance(line.file, str):
                        raise ValueError("a model line's file is not text")
                    if line.line is not None and not _is_int(line.line):
                        raise ValueError("a model line's line is not a number")
        for note in mem.reconcile_notes:
            _check_fields(note, ReconcileNote)
    _typed(tuple[str, ...], a.spec.nvcc_flags, "spec.nvcc_flags")
    if a.registers is not None:
        _check_registers(a.registers)


def _check_registers(rp: RegisterPressure) -> None:
    """The live registers' per-instruction columns are one length, their sites index the
    table, the peak is one of the instructions (the renderers index them)."""
    n = len(rp.offsets)
    if any(len(col) != n for col in (rp.gpr, rp.pred, rp.ugpr, rp.upred, rp.sites)):
        raise ValueError("the live registers' columns differ in length")
    if any(not 0 <= i < len(rp.sites_table) for i in rp.sites):
        raise ValueError("a live-register site is not in the table")
    if n and not 0 <= rp.peak_index < n:
        raise ValueError("the live registers' peak is not an instruction")


def _check_finding(f: Finding) -> None:
    for name in ("rule", "name", "title", "severity", "message"):
        _typed(str, getattr(f, name), f"finding.{name}")
    _typed(str | None, f.file, "finding.file")
    _typed(int | None, f.line, "finding.line")
    if f.severity not in ("error", "warning", "note"):
        raise ValueError(f"a finding's severity is {f.severity!r}")


def _check_fields(record: Any, cls: type) -> None:
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        _typed(hints[field.name], getattr(record, field.name), f"{cls.__name__}.{field.name}")


# --------------------------------------------------------------------------------------------
# Plain records: written field by field, read back checked against the field types


def _plain(record: Any) -> dict[str, Any]:
    return {f.name: _json_value(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _json_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list | frozenset | set):
        return [_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # a numpy scalar
        return value.item()
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _typed(tp: Any, value: Any, where: str) -> Any:
    """``value`` (parsed JSON) as the type ``tp`` says, or ValueError naming ``where``."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for member in typing.get_args(tp):
            try:
                return _typed(member, value, where)
            except ValueError:
                continue
        raise ValueError(f"{where}: {type(value).__name__} is none of {tp}")
    if origin is typing.Literal:
        if value not in typing.get_args(tp) or isinstance(value, bool):
            raise ValueError(f"{where}: {value!r} is none of {typing.get_args(tp)}")
        return value
    if tp is type(None):
        if value is not None:
            raise ValueError(f"{where}: not null")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: not true or false")
        return value
    if tp is int:
        if not _is_int(value):
            raise ValueError(f"{where}: not an integer")
        return value
    if tp is float:
        if not (_is_int(value) or isinstance(value, float)):
            raise ValueError(f"{where}: not a number")
        return value  # an int stays one: the reports print what the analysis held
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: not text")
        return value
    if origin in (tuple, list):
        if not isinstance(value, list | tuple):
            raise ValueError(f"{where}: not a list")
        args = typing.get_args(tp) or (Any,)
        if origin is tuple and args[-1] is not Ellipsis:  # a fixed-length tuple[A, B]
            if len(value) != len(args):
                raise ValueError(f"{where}: {len(value)} items, not {len(args)}")
            pairs = enumerate(zip(args, value, strict=True))
            return tuple(_typed(t, v, f"{where}[{i}]") for i, (t, v) in pairs)
        item = args[0]
        items = [_typed(item, v, f"{where}[]") for v in value]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: not an object")
        args = typing.get_args(tp) or (str, Any)
        return {_typed(str, k, where): _typed(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if not isinstance(value, str) or value not in tp.__members__:
            raise ValueError(f"{where}: {value!r} is no {tp.__name__}")
        return tp[value]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: not an object")
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        if set(value) != names:
            raise ValueError(f"{where}: the fields are not those of {tp.__name__}")
        return tp(**{n: _typed(hints[n], value[n], f"{where}.{n}") for n in names})
    raise ValueError(f"{where}: no reader for {tp}")  # pragma: no cover
