"""Small text helpers for rule messages (numbers with units, never a bare float)."""
from __future__ import annotations

import math

GIB = float(2**30)


def gib(num_bytes: float) -> str:
    return f"{num_bytes / GIB:.1f} GiB"


def pct(frac: float) -> str:
    return f"{frac * 100:.0f}%"


def ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def round_up(value: float, multiple: int) -> int:
    return int(-(-value // multiple) * multiple)


def round_down(value: float, multiple: int) -> int:
    return int(value // multiple * multiple)


def seqs_at_least(value: float) -> int:
    """The smallest batch cap >= value that vLLM captures a CUDA graph for: 1, 2, 4, then every 8
    (vllm/config/compilation.py). No power of two is needed, whatever a tuning guide says."""
    for small in (1, 2, 4):
        if value <= small:
            return small
    return math.ceil(value / 8) * 8
