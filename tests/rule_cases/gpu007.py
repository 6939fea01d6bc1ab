"""GPU007, persistence mode off (rules/catalog/gpu007_persistence_mode_off.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    gpu0,
    snapshot,
)

CODE = "GPU007"


def cases() -> list[Case]:
    return [
        case("positive_off", "Persistence mode off", {**FIRES, "severity": "low", "commands": ["sudo nvidia-smi -pm 1"]},
             snapshot(gpu0(persistence_mode_enabled=False))),
        case("negative_on", "Persistence mode on", PASSES, snapshot()),
    ]
