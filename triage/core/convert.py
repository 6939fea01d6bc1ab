"""Dataclasses <-> plain JSON values, typed by the dataclasses' annotations.

`from_dict` is lenient by default (a report from a newer 1.x may carry fields this reader does not
know, and they are dropped); `strict=True` rejects unknown keys, which is how probes build their
payloads, so a key a probe misspells fails loudly instead of vanishing.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from typing import Any

from triage.core.errors import ReportError


def to_dict(obj: Any) -> Any:
    """A dataclass tree as plain JSON-ready values (enums by value, tuples as lists)."""
    if hasattr(obj, "__json__") and not isinstance(obj, type):
        return to_dict(obj.__json__())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, float) and not math.isfinite(obj):
        return None           # NaN and infinities are "not measured": reports are standard JSON
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def _convert(tp: Any, value: Any, where: str, strict: bool) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(args[0], value, where, strict) if len(args) == 1 else value
    if origin in (tuple, list):
        return _sequence(tp, origin, value, where, strict)
    if origin is dict:
        if not isinstance(value, dict):
            raise ReportError(f"{where}: expected an object, got {type(value).__name__}")
        _, inner = typing.get_args(tp) or (str, Any)
        return {k: _convert(inner, v, f"{where}.{k}", strict) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp, value, where)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        return from_dict(tp, value, where, strict=strict)
    return value


def _sequence(tp: Any, origin: Any, value: Any, where: str, strict: bool) -> Any:
    args = typing.get_args(tp)
    if not isinstance(value, (list, tuple)):
        raise ReportError(f"{where}: expected a list, got {type(value).__name__}")
    inner = args[0] if args else Any
    items = [_convert(inner, v, f"{where}[{i}]", strict) for i, v in enumerate(value)]
    return tuple(items) if origin is tuple else items


def _enum(tp: type[enum.Enum], value: Any, where: str) -> enum.Enum:
    try:
        return tp(value)
    except ValueError:
        choices = ", ".join(m.value for m in tp)
        raise ReportError(f"{where}: {value!r} is not one of {choices}") from None


_HINTS: dict[type, dict[str, Any]] = {}


def hints_of(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def from_dict(cls: type, data: Any, where: str = "report", strict: bool = False) -> Any:
    """Build dataclass `cls` from a dict; unknown keys are ignored (fields may be added in 1.x) unless
    `strict`, where they raise ReportError."""
    if not isinstance(data, dict):
        raise ReportError(f"{where}: expected an object, got {type(data).__name__}")
    hints = hints_of(cls)
    kwargs = {}
    names = set()
    for f in dataclasses.fields(cls):
        names.add(f.name)
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}", strict)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ReportError(f"{where}: missing required key {f.name!r}")
    if strict:
        unknown = sorted(set(data) - names)
        if unknown:
            raise ReportError(f"{where}: {cls.__name__} has no field {', '.join(unknown)}")
    return cls(**kwargs)
