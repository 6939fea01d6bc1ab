"""Reading an engine's settings from its command line and environment: pure string handling."""
from __future__ import annotations

from collections.abc import Sequence


def flag_value(argv: Sequence[str], names: tuple[str, ...]) -> str | None:
    """The last value given to any of `names` (`--flag V` or `--flag=V`), or None."""
    value = None
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                value = argv[i + 1]
            elif arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
    return value


def bounded_int(text: str | None) -> int | None:
    """An integer from -1 to 1e9, or None (not set, not a number, or absurd)."""
    try:
        value = int(str(text).strip())
    except (TypeError, ValueError):
        return None
    return value if -1 <= value <= 1_000_000_000 else None
