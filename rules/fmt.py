"""Small text helpers for rule messages (numbers with units, never a bare float)."""
from __future__ import annotations

GIB = float(2**30)


def gib(num_bytes: float) -> str:
    return f"{num_bytes / GIB:.1f} GiB"


def pct(frac: float) -> str:
    return f"{frac * 100:.0f}%"


def ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def round_up(value: float, multiple: int) -> int:
    return int(-(-value // multiple) * multiple)


def pow2_at_least(value: float) -> int:
    n = 1
    while n < value:
        n *= 2
    return n
