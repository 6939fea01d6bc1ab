"""CPU002, cpu governor not performance (rules/catalog/cpu002_cpu_governor_not_performance.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cpu,
    snapshot,
)

CODE = "CPU002"


def cases() -> list[Case]:
    return [
        case("positive_powersave", "powersave governor",
             {**FIRES, "commands": ["sudo cpupower frequency-set -g performance"]},
             snapshot(cpu(governor="powersave", governors={"powersave": 112}))),
        case("negative_performance", "performance governor", PASSES, snapshot()),
        case("skipped_vm", "No cpufreq in this VM", {"fires": False, "skipped_reason": "governor"},
             snapshot(cpu(governor=None, governors={}))),
    ]
