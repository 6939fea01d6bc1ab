"""The one home of report JSON: dataclasses <-> dicts <-> files, with the schema_version check."""
from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from triage.core.convert import from_dict, to_dict
from triage.core.errors import ReportError
from triage.core.report import SCHEMA_VERSION, Report

__all__ = ["from_dict", "to_dict", "read_report", "write_report", "dumps", "loads", "report_from_dict",
           "load_schema", "check_schema_version"]

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"


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
    validate(data, source)
    return from_dict(Report, data, source)


@functools.lru_cache(maxsize=8)
def _validator(path: Path) -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def validate(data: dict[str, Any], source: str = "report") -> None:
    """Check a report against the JSON Schema of its own schema_version (the newest one of its major
    version when this triage has no file for it): one line naming the first bad field, as a ReportError."""
    import jsonschema

    path = schema_path(str(data.get("schema_version")))
    if not path.exists():
        path = schema_path(SCHEMA_VERSION)
    try:
        error = jsonschema.exceptions.best_match(_validator(path).iter_errors(data))
    except RecursionError:
        raise ReportError(f"{source}: nested too deeply to be a triage report") from None
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ReportError(f"{source}: not a valid triage report at {where}: {error.message[:200]}")


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
        mask = os.umask(0)          # mkstemp makes the file 0600: give it the mode a plain write would (0644
        os.umask(mask)              # under the usual umask), as every other file triage writes
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, p)
    except OSError as e:
        raise ReportError(f"{p}: cannot write the report ({e})") from None
    return p


def schema_path(version: str = SCHEMA_VERSION) -> Path:
    """Each schema_version keeps its own file: report-1.0.schema.json, report-1.1.schema.json ..."""
    return SCHEMA_DIR / f"report-{version}.schema.json"


def load_schema(version: str = SCHEMA_VERSION) -> dict[str, Any]:
    return json.loads(schema_path(version).read_text(encoding="utf-8"))
