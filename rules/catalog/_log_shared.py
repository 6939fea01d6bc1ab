"""Helpers for the rules that judge the server's own log (the `logs` probe: `--log`, or `diagnose --from FILE`)."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import LogEvent, LogsData, ServerConfigData
from triage.rules.base import MissingInput
from triage.rules.context import Context


def log_of(ctx: Context) -> LogsData:
    """The log's payload, or MissingInput when no log was given or it names no engine's lines."""
    return ctx.need(LogsData)


def events(logs: LogsData, *facts: str) -> list[LogEvent]:
    return [e for e in logs.events if e.fact in facts]


def where(logs: LogsData, event: LogEvent | None = None) -> str:
    """`server.log:L120` for an event, else the last start's span `server.log:L1-L340`."""
    path = logs.path or "the log"
    if event is not None and event.line_no is not None:
        return f"{event.path or path}:L{event.line_no}"
    if logs.first_line_no is not None and logs.last_line_no is not None:
        return f"{path}:L{logs.first_line_no}-L{logs.last_line_no}"
    return path


def log_evidence(logs: LogsData, event: LogEvent, prefix: str = "logs") -> dict[str, Any]:
    """An event's evidence: where it was read, its line (redacted), its numbers, the format string's claim."""
    out: dict[str, Any] = {f"{prefix}.{event.fact}.at": where(logs, event), f"{prefix}.{event.fact}.line": event.line}
    for key, value in (event.values or {}).items():
        out[f"{prefix}.{event.fact}.{key}"] = value
    if event.phase:
        out[f"{prefix}.{event.fact}.phase"] = event.phase
    if event.claim:
        out[f"{prefix}.{event.fact}.claim"] = event.claim
    return out


def restarts_note(logs: LogsData) -> str:
    """' The log holds N earlier starts (judged: the last).' or ''."""
    n = logs.num_restarts or 0
    return f" The log holds {n} earlier start{'s' if n != 1 else ''}; the last one is judged." if n else ""


def need_engine_log(ctx: Context) -> LogsData:
    """The log, when it was read as some engine's (an unrecognised log states nothing these rules can judge), by
    a triage that records the log's events (a report from before them has no `source`)."""
    logs = log_of(ctx)
    if logs.source is None:
        raise MissingInput("the log was read by an older triage, which did not record what it states; run "
                           "diagnose --from on the log itself")
    if logs.engine is None and not logs.events:
        raise MissingInput("the log holds no line of a known engine (vLLM, SGLang, TGI, llama.cpp, Ollama)")
    return logs


def configured(ctx: Context, logs: LogsData, key: str) -> Any:
    """A setting from the log's config line, else the live server's (None when neither says)."""
    value = (logs.config or {}).get(key)
    return value if value is not None else getattr(ctx.seen(ServerConfigData), key)
