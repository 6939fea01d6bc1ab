"""A server log as people hand it over, made plain again: pure functions over text, no I/O.

    lines = plain_lines(text)      # -> [(line number in the file, text)], oldest first

Logs arrive pasted into tickets and web consoles. What is undone here, in this order:
- CRLF and lone CR line ends (splitlines);
- one JSON object per line (docker's json-file driver `{"log": ...}`, cluster logging's `message`/`msg`/
  `textPayload`): the message is kept, with the record's time stamp in front when the message has none;
- ANSI colour and cursor codes;
- Markdown: code fences dropped, quote markers (`> `) and bold/italic markers (`**`, `__`) stripped;
- container prefixes: `docker compose` (`vllm-1  | `) and `kubectl logs --prefix` (`[pod/NAME/CONTAINER] `);
- newest-first order (web consoles), told by the lines' own time stamps, put back oldest first.
Each kept line keeps the number of the line it came from in the file, so a finding can say where it was read.
"""
from __future__ import annotations

import json
import re
from datetime import datetime

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_EMPHASIS = re.compile(r"\*\*|__")
# `docker compose logs`: the service and its replica, padded, then " | "; `kubectl logs --prefix`: [pod/P/C].
_COMPOSE = re.compile(r"^[A-Za-z0-9][\w.-]*\s*\|\s?")
_KUBECTL = re.compile(r"^\[pod/[^\]\s]+\]\s?")
ORDER_SAMPLE = 2000
_JSON_MESSAGE_KEYS = ("log", "message", "msg", "textPayload", "MESSAGE")
_JSON_TIME_KEYS = ("time", "timestamp", "@timestamp", "ts")
# Time stamps the engines write: ISO (`2025-01-01 12:00:00`, `2024-05-01T12:00:00.12Z`, Ollama's `time=`) and
# vLLM's `MM-DD HH:MM:SS`.
ISO_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?")
MONTH_DAY_TIME = re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)?\b")


_SIZE = re.compile(r"([\d.]+)\s*(GiB|MiB|KiB|GB|MB|KB|bytes|B)\b", re.I)
_UNIT = {"gib": 2**30, "gb": 2**30, "mib": 2**20, "mb": 2**20, "kib": 2**10, "kb": 2**10, "bytes": 1, "b": 1}


def sizes_bytes(text: str | None) -> list[float]:
    """Every size the text states, in bytes ('1.96 GiB', '[22.0 GiB 22.0 GiB]': torch's, ggml's and Ollama's
    binary units)."""
    return [float(m.group(1)) * _UNIT[m.group(2).lower()] for m in _SIZE.finditer(text or "")]


def stamp_s(line: str) -> float | None:
    """Seconds on some fixed scale from the line's own wall-clock time stamp, or None."""
    if m := ISO_TIME.search(line):
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        try:
            return datetime(y, mo, d, h, mi, s).timestamp() + float(m.group(7) or 0)
        except ValueError:
            return None
    if m := MONTH_DAY_TIME.search(line):
        mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
        try:
            return datetime(2000, mo, d, h, mi, s).timestamp() + float(m.group(6) or 0)
        except ValueError:
            return None
    return None


def _from_json(line: str) -> str:
    """The message of a one-object-per-line record, else the line as it is."""
    s = line.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return line
    try:
        record = json.loads(s)
    except ValueError:
        return line
    if not isinstance(record, dict):
        return line
    message = next((record[k] for k in _JSON_MESSAGE_KEYS if isinstance(record.get(k), str)), None)
    if message is None:
        return line
    message = message.rstrip("\n")
    when = next((record[k] for k in _JSON_TIME_KEYS if isinstance(record.get(k), str)), None)
    if when and stamp_s(message) is None:
        message = f"{when} {message}"
    return message


def _unwrap(line: str) -> str | None:
    """One line made plain; None for a line that is only Markdown (a fence)."""
    line = _ANSI.sub("", _from_json(_ANSI.sub("", line)))
    if _FENCE.match(line):
        return None
    line = _QUOTE.sub("", line)
    line = _KUBECTL.sub("", line)
    if (m := _COMPOSE.match(line)) and not _looks_like_table(line):
        line = line[m.end():]
    return _EMPHASIS.sub("", line).rstrip()


def _looks_like_table(line: str) -> bool:
    """A Markdown table row or nvidia-smi's box drawing: bars that are not a single container prefix."""
    return line.lstrip().startswith("|") or line.count("|") >= 3


def _newest_first(stamps: list[float]) -> bool:
    """More steps back in time than forward: the lines were listed newest first."""
    back = sum(b < a for a, b in zip(stamps, stamps[1:], strict=False))
    forward = sum(b > a for a, b in zip(stamps, stamps[1:], strict=False))
    return back > forward and back >= 2


def plain_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number in the file, the line made plain), oldest first; blank lines dropped."""
    out: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _unwrap(raw)
        if line:
            out.append((number, line))
    step = max(1, len(out) // ORDER_SAMPLE)               # the order is told from an even sample of the lines
    stamps = [t for t in (stamp_s(line) for _, line in out[::step]) if t is not None]
    if _newest_first(stamps):
        out.reverse()
    return out
