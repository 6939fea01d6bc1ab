"""The one home of report JSON: dataclasses <-> dicts <-> files, with the schema_version check."""
from __future__ import annotations

import dataclasses
import enum
import json
import os
import tempfile
import types
import typing
from pathlib import Path
from typing import Any

from triage.core.errors import ReportError
from triage.core.report import SCHEMA_VERSION, Report

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"


def to_dict(obj: Any) -> Any:
    """A dataclass tree as plain JSON-ready values (enums by value, tuples as lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def _convert(tp: Any, value: Any, where: str) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(args[0], value, where) if len(args) == 1 else value
    if origin in (tuple, list):
        args = typing.get_args(tp)
        if not isinstance(value, list):
            raise ReportError(f"{where}: expected a list, got {type(value).__name__}")
        inner = args[0] if args else Any
        items = [_convert(inner, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ReportError(f"{where}: expected an object, got {type(value).__name__}")
        _, inner = typing.get_args(tp) or (str, Any)
        return {k: _convert(inner, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            choices = ", ".join(m.value for m in tp)
            raise ReportError(f"{where}: {value!r} is not one of {choices}") from None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    return value


def from_dict(cls: type, data: Any, where: str = "report") -> Any:
    """Build dataclass `cls` from a dict, ignoring unknown keys (fields may be added in 1.x)."""
    if not isinstance(data, dict):
        raise ReportError(f"{where}: expected an object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ReportError(f"{where}: missing required key {f.name!r}")
    return cls(**kwargs)


def check_schema_version(version: Any, source: str) -> None:
    if not isinstance(version, str) or not version:
        raise ReportError(f"{source}: no schema_version; this is not a triage report")
    ours = SCHEMA_VERSION.split(".")[0]
    theirs = version.split(".")[0]
    if theirs != ours:
        raise ReportError(
            f"{source}: schema_version {version} is incompatible with this triage "
            f"(reads {ours}.x); re-run the report with a matching triage version"
        )


def report_from_dict(data: Any, source: str = "report") -> Report:
    if not isinstance(data, dict):
        raise ReportError(f"{source}: expected a JSON object at the top level")
    check_schema_version(data.get("schema_version"), source)
    return from_dict(Report, data, source)


def dumps(report: Report) -> str:
    return json.dumps(to_dict(report), indent=2, allow_nan=False) + "\n"


def loads(text: str, source: str = "report") -> Report:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{source}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    return report_from_dict(data, source)


def read_report(path: str | os.PathLike[str]) -> Report:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{p}: cannot read it ({e})") from None
    return loads(text, str(p))


def write_report(report: Report, path: str | os.PathLike[str]) -> Path:
    """Write atomically (temp file + rename), so an interrupted write never leaves half a report."""
    p = Path(path)
    text = dumps(report)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except OSError as e:
        raise ReportError(f"{p}: cannot write the report ({e})") from None
    return p


def load_schema() -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / "report.schema.json").read_text(encoding="utf-8"))
