"""MEM001, swap active (rules/catalog/mem001_swap_active.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    memory,
    snapshot,
)
from tests.rule_cases._healthy import GIB

CODE = "MEM001"


def cases() -> list[Case]:
    return [
        case("positive_swapping", "200 MiB swapped in during the window",
             {**FIRES, "severity": "high", "commands": ["sudo swapoff -a"]},
             snapshot(memory(swap_total_bytes=8 * GIB, swap_in_bytes_delta=200 * 2**20,
                             swap_out_bytes_delta=50 * 2**20))),
        case("negative_swap_idle", "Swap enabled but nothing moved", PASSES,
             snapshot(memory(swap_total_bytes=8 * GIB, swap_used_bytes=100 * 2**20))),
    ]
