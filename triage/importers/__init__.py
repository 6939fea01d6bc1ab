"""Peers' result files as triage bench reports: vLLM `bench serve --save-result` JSON, AIPerf
`profile_export_aiperf.json`, GuideLLM `benchmarks.json`. `load_any` reads a triage report or detects the
peer format; an unknown file is one line saying what was expected (exit 2)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from triage.core.errors import ReportError
from triage.core.report import Report
from triage.core.report_io import report_from_dict
from triage.importers import aiperf, guidellm, vllm

EXPECTED = ("a triage report (schema_version), a vLLM `bench serve --save-result` JSON, an AIPerf "
            "profile_export_aiperf.json or a GuideLLM benchmarks.json")


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot read it ({e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
                          f"expected {EXPECTED}") from None


def detect(data: Any) -> str:
    """'triage', 'vllm', 'aiperf' or 'guidellm'; ReportError for anything else."""
    if isinstance(data, dict) and "schema_version" in data and "kind" in data:
        return "triage"
    for name, module in (("aiperf", aiperf), ("guidellm", guidellm), ("vllm", vllm)):
        if module.looks_like(data):
            return name
    return ""


# result-file format -> its converter (AIPerf's reads its per-request records beside the file)
_CONVERTERS = {"aiperf": aiperf.convert, "guidellm": lambda data, path: guidellm.convert(data),
               "vllm": lambda data, path: vllm.convert(data)}


def convert(data: Any, path: Path, fmt: str) -> Report:
    try:
        return _CONVERTERS[fmt](data, path)
    except ReportError as e:
        raise ReportError(f"{path}: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ReportError(f"{path}: looks like a {fmt} result file but could not be read "
                          f"({type(e).__name__}: {e})") from None


def load_any(path: str | Path) -> Report:
    p = Path(path)
    data = _read(p)
    fmt = detect(data)
    if fmt == "triage":
        return report_from_dict(data, str(p))
    if not fmt:
        keys = ", ".join(sorted(data)[:6]) if isinstance(data, dict) else type(data).__name__
        raise ReportError(f"{p}: unknown result format (top level: {keys}); expected {EXPECTED}")
    return convert(data, p, fmt)


def import_peer(path: str | Path) -> tuple[str, Report]:
    """(detected format, bench report) for `triage import`; a triage report is refused (nothing to import)."""
    p = Path(path)
    data = _read(p)
    fmt = detect(data)
    if fmt == "triage":
        raise ReportError(f"{p}: already a triage report; nothing to import")
    if not fmt:
        keys = ", ".join(sorted(data)[:6]) if isinstance(data, dict) else type(data).__name__
        raise ReportError(f"{p}: unknown result format (top level: {keys}); expected a vLLM `bench serve "
                          "--save-result` JSON, an AIPerf profile_export_aiperf.json or a GuideLLM benchmarks.json")
    return fmt, convert(data, p, fmt)
