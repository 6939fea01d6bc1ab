"""Durations on the command line: '500ms', '20s', '1.5m', '2h', '7d' or a bare number of seconds."""
from __future__ import annotations

import re

from triage.core.errors import UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration_s(text: str, flag: str) -> float:
    """Seconds in `text`; a UsageError naming `flag` when it is not a positive duration."""
    match = _DURATION.match(str(text))
    if not match:
        raise UsageError(f"{flag} {text!r}: expected a duration like 20s, 2m, 1h or 500ms")
    seconds = float(match.group(1)) * _SECONDS[match.group(2) or "s"]
    if not seconds > 0:
        raise UsageError(f"{flag} {text!r}: the duration must be > 0")
    return seconds
