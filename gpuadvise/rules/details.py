"""A rule's details: what its ``detect`` hands to ``estimate``/``transform``, typed
(:class:`FindingDetails`, a frozen dataclass of the rule's module) and serializable: a finding's
JSON carries the class's name, and reading it back finds the class again in the module of the
finding's rule (in the registry given, the bundled rules by default).
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from typing import Any, Protocol

from gpuadvise.errors import GpuAdviseError

__all__ = [
    "FindingDetails",
    "RuleLookup",
    "details_from_dict",
    "details_to_dict",
    "use_bundled_rules",
]


class RuleLookup(Protocol):
    """What reading details back asks of a registry (:class:`gpuadvise.rules.registry.Registry`):
    the rule of an id, whose class's module holds the details classes."""

    def find(self, key: str) -> object | None: ...


# The bundled rules' registry (gpuadvise.rules.registry.load_registry), installed by the registry
# module: it imports the Rule class, which imports the finding types and this module, so this module
# cannot import it.
_bundled_rules: Callable[[], RuleLookup] | None = None


def use_bundled_rules(load: Callable[[], RuleLookup] | None) -> None:
    """Look details classes up in ``load()``'s rules when a finding is read back without a
    registry (None: leave such details as plain JSON)."""
    global _bundled_rules
    _bundled_rules = load


_JSON_SCALARS = (str, int, float, bool, type(None))


def _to_json(value: Any, where: str) -> Any:
    if isinstance(value, FindingDetails):
        return value.to_dict()
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, (tuple, list)):
        return [_to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: a details mapping's keys must be str, not {k!r}")
            out[k] = _to_json(v, f"{where}.{k}")
        return out
    raise TypeError(
        f"{where}: {type(value).__name__} is not JSON-safe (details hold str, int, float, bool, "
        "None, and tuples, lists, dicts or FindingDetails of those)"
    )


def _from_json(hint: Any, value: Any) -> Any:
    """``value`` (parsed JSON) as the type ``hint`` names: lists become tuples where the field
    is a tuple, dicts become the FindingDetails class a field names."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        for a in members:  # the first member the value's JSON shape fits
            o = typing.get_origin(a) or a
            if isinstance(value, list) and o in (tuple, list):
                return _from_json(a, value)
            if isinstance(value, dict) and (
                o in (dict, Mapping) or (isinstance(o, type) and issubclass(o, FindingDetails))
            ):
                return _from_json(a, value)
        return value
    if isinstance(hint, type) and issubclass(hint, FindingDetails) and isinstance(value, dict):
        return hint.from_dict(value)
    if origin is tuple and isinstance(value, list):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_json(args[0], v) for v in value)
        if args and len(args) == len(value):
            return tuple(_from_json(a, v) for a, v in zip(args, value, strict=True))
        return tuple(_from_json(Any, v) for v in value)
    if origin is list and isinstance(value, list):
        (arg,) = typing.get_args(hint) or (Any,)
        return [_from_json(arg, v) for v in value]
    if origin in (dict, Mapping) and isinstance(value, dict):
        args = typing.get_args(hint)
        arg = args[1] if len(args) == 2 else Any
        return {k: _from_json(arg, v) for k, v in value.items()}
    return value


class FindingDetails:
    """Base of a rule's typed details: what its ``detect`` hands to ``estimate``/``transform``.

    A subclass is a frozen dataclass defined at the top level of the rule's module, whose fields
    are JSON-safe: str, int, float (finite), bool, None, and tuples, lists, str-keyed dicts or
    other FindingDetails of those. What cannot be JSON (arrays, the trace view, a model's
    result, the parsed source) is not kept: ``estimate``/``transform`` recompute it from the
    context with the ids, names and lines the details hold. :meth:`to_dict`/:meth:`from_dict`
    follow from the fields; a finding's JSON carries the class's name as ``type``, and
    :meth:`Finding.from_dict` finds the class again in the module of the finding's rule.
    """

    def to_dict(self) -> dict[str, Any]:
        if not is_dataclass(self):
            raise TypeError(f"{type(self).__name__} must be a dataclass")
        return {
            f.name: _to_json(getattr(self, f.name), f"{type(self).__name__}.{f.name}")
            for f in fields(self)
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        hints = typing.get_type_hints(cls)
        return cls(
            **{
                f.name: _from_json(hints.get(f.name, Any), d[f.name])
                for f in fields(cls)  # type: ignore[arg-type]
                if f.name in d
            }
        )


def details_to_dict(details: FindingDetails | Mapping[str, Any] | None) -> Any:
    if details is None:
        return None
    if isinstance(details, FindingDetails):
        return {"type": type(details).__name__, "fields": details.to_dict()}
    return _to_json(details, "details")


def details_from_dict(rule_id: str, d: Any, registry: RuleLookup | None) -> Any:
    """A finding's details from its JSON: the rule's class named by ``type``, looked up in the
    module of the rule (``registry``'s, the bundled rules by default); an unknown rule or type
    leaves the JSON as it is."""
    if not isinstance(d, Mapping) or set(d) != {"type", "fields"}:
        return d
    if registry is None:
        if _bundled_rules is None:
            return dict(d)
        try:
            registry = _bundled_rules()
        except GpuAdviseError:
            return dict(d)
    rule = registry.find(rule_id)
    module = None
    if rule is not None:  # the module the registry loaded the rule as (Rule._module)
        module = getattr(type(rule), "_module", None) or sys.modules.get(type(rule).__module__)
    cls = getattr(module, str(d["type"]), None) if module is not None else None
    if not (isinstance(cls, type) and issubclass(cls, FindingDetails)):
        return dict(d)
    return cls.from_dict(d["fields"])
