"""GPU003, power cap lowered (rules/catalog/gpu003_power_cap_lowered.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    gpu0,
    snapshot,
)

CODE = "GPU003"


def cases() -> list[Case]:
    return [
        case("positive_lowered_cap", "Power limit 450 W on a 700 W board",
             {**FIRES, "severity": "medium", "commands": ["sudo nvidia-smi -i 0 -pl 700"]},
             snapshot(gpu0(power_limit_enforced_w=450.0))),
        case("negative_default_cap", "Enforced equals default", PASSES, snapshot()),
    ]
