"""Number formatting shared by the renderers. None prints as 'n/a', never as 0."""
from __future__ import annotations

from typing import Any


def num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and abs(value) < 10 ** -digits:
            return f"{value:.2g}"
        return f"{value:,.{digits}f}"
    return str(value)


def md_table(columns: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return num(v).replace("|", "\\|") if not isinstance(v, str) else v.replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
