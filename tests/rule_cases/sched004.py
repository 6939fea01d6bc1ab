"""SCHED004, throughput not scaling (rules/catalog/sched004_throughput_not_scaling.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    level,
    snapshot,
)

CODE = "SCHED004"


def cases() -> list[Case]:
    return [
        case("positive_flat", "c=1 41 tok/s, c=16 55 tok/s",
             {**FIRES, "severity": "high", "evidence_keys": ["derived.scaling_x"]},
             snapshot(), bench(level(0, output_tokens_per_s=41.0), level(2, output_tokens_per_s=55.0))),
        case("negative_scales", "12.5x from c=1 to c=16", PASSES, snapshot(), bench()),
        case("skipped_no_high_level", "Only c=1 and c=4 measured",
             {"fires": False, "skipped_reason": "concurrency >= 16"}, snapshot(), bench(concurrencies=(1, 4))),
    ]
