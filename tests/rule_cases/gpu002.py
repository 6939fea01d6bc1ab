"""GPU002, clock throttling (rules/catalog/gpu002_clock_throttling.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    edit,
    gpu0,
    level,
    snapshot,
)

CODE = "GPU002"


def cases() -> list[Case]:
    return [
        case("positive_hw_thermal", "HW thermal slowdown at 97% utilization",
             {**FIRES, "severity": "high", "certainty": "confirmed",
              "evidence_keys": ["gpu.gpus[0].clock_event_reasons"]},
             snapshot(gpu0(clock_event_reasons=("hw_thermal_slowdown",), utilization_gpu_pct=97.0, sm_clock_mhz=1005))),
        case("positive_bench_power_brake", "Power brake seen during a loaded bench level, no NVML probe",
             {**FIRES, "evidence_keys": ["bench.c64.gpu.clock_event_reasons_seen"]},
             snapshot(drop=("gpu",)), bench(level(3, "gpu", clock_event_reasons_seen=("hw_power_brake_slowdown",)))),
        case("positive_thermal_counter", "NVML's thermal throttle counter ran 12% of the window",
             {**FIRES, "evidence_keys": ["gpu.gpus[0].throttle_time_frac.thermal+board_limit+reliability"]},
             snapshot(edit("gpu", "gpus[0].throttle_time_frac", thermal=0.12))),
        case("negative_sw_power_cap_at_load", "Software power cap at full load is normal",
             PASSES, snapshot(gpu0(clock_event_reasons=("sw_power_cap",), utilization_gpu_pct=99.0))),
        case("negative_idle_thermal", "A slowdown flag on an idle GPU is not throttling under load",
             PASSES, snapshot(gpu0(clock_event_reasons=("gpu_idle", "sw_thermal_slowdown"), utilization_gpu_pct=0.0))),
    ]
