"""GPU012, gpu near thermal slowdown (rules/catalog/gpu012_gpu_near_thermal_slowdown.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    gpu0,
    snapshot,
)

CODE = "GPU012"


def cases() -> list[Case]:
    return [
        case("positive_hot_under_load", "86 °C at 94% load with slowdown at 90 °C",
             {**FIRES, "evidence_keys": ["gpu.gpus[0].temperature_c"]},
             snapshot(gpu0(temperature_c=86, utilization_gpu_pct=94.0))),
        case("negative_cool", "62 °C under load", PASSES, snapshot()),
        case("negative_hot_idle", "Hot but idle (a neighbour's exhaust): judged under load only",
             PASSES, snapshot(gpu0(temperature_c=87, utilization_gpu_pct=2.0))),
    ]
