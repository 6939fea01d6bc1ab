"""MEM002, host memory pressure (rules/catalog/mem002_host_memory_pressure.py): its fixture cases."""
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

CODE = "MEM002"


def cases() -> list[Case]:
    return [
        case("positive_low_available", "4% of host RAM available", {**FIRES, "severity": "high"},
             snapshot(memory(available_pct=4.0, available_bytes=int(0.04 * 512 * GIB)))),
        case("negative_plenty", "78% available", PASSES, snapshot()),
    ]
