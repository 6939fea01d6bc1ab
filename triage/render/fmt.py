"""Number formatting shared by the renderers. None prints as 'n/a', never as 0."""
from __future__ import annotations

import math
from typing import Any

_SHARE_WORDS = frozenset({"frac", "fraction", "share"})   # a value in 0..1: shown as a percentage
_PERCENT_WORDS = frozenset({"pct", "percent"})            # a value already in percent


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


def _meaning(key: str) -> str | None:
    """'share' or 'percent' when the key's last part names one (kv_cache_usage_frac_max, utilization_gpu_pct)."""
    words = set(key.rsplit(".", 1)[-1].lower().split("_"))
    if words & _SHARE_WORDS:
        return "share"
    return "percent" if words & _PERCENT_WORDS else None


def percent(value: float) -> str:
    """A percentage as the rules' messages write it (rules/fmt.py `pct`): whole percents, finer below 1%."""
    if value != 0 and abs(value) < 1:
        return f"{value:.1g}%"
    return f"{value:.0f}%"


def plain(value: float) -> str:
    """A number by what it is: a whole number without decimals (a count: 11, not 11.00), else at most two."""
    if not math.isfinite(value):
        return str(value)
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) < 0.01:
        return f"{value:.2g}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def evidence_value(key: str, value: Any) -> str:
    """One evidence value, formatted by its meaning as named by its key: shares (`_frac`, `_fraction`,
    `_share`) and percentages (`_pct`) as percentages, counts as whole numbers, mappings and lists item by
    item. The one formatter of evidence for every renderer (text, HTML)."""
    if value is None or isinstance(value, (bool, str)):
        return num(value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {evidence_value(str(k) if _meaning(str(k)) else key, v)}"
                         for k, v in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(evidence_value(key, v) for v in value) or "none"
    if not isinstance(value, (int, float)):
        return str(value)
    meaning = _meaning(key)
    if meaning == "share" and math.isfinite(value):
        return percent(value * 100)
    if meaning == "percent" and math.isfinite(value):
        return percent(value)
    return plain(value)


def md_table(columns: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return num(v).replace("|", "\\|") if not isinstance(v, str) else v.replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def size_text(n: int | None) -> str:
    """A byte count in binary units ("1.5 GiB"); "" for none."""
    if not n:
        return ""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
