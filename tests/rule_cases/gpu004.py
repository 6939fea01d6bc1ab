"""GPU004, pcie link degraded (rules/catalog/gpu004_pcie_link_degraded.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._active import active_snapshot, pcie0
from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    gpu0,
    snapshot,
)

CODE = "GPU004"


IDLE = (gpu0(pcie_link_gen_current=1, pcie_read_utilization_gpu_pct=0.0, utilization_gpu_pct=0.0),)


def cases() -> list[Case]:
    return [
        case("positive_gen3_x8_busy", "Gen3 x8 on a Gen5 x16 H100 at 85% load (seed 003 case 1)",
             {**FIRES, "severity": "high", "certainty": "confirmed",
              "evidence_keys": ["gpu.gpus[0].pcie_link_gen_current", "gpu.gpus[0].pcie_link_width_current"]},
             snapshot(gpu0(pcie_link_gen_current=3, pcie_link_width_current=8, pcie_read_utilization_gpu_pct=85.0))),
        case("negative_idle_downshift", "An idle GPU downshifted its link to Gen1 to save power",
             {"fires": False, "skipped_reason": "idle"},
             snapshot(gpu0(pcie_link_gen_current=1, pcie_read_utilization_gpu_pct=0.0, utilization_gpu_pct=0.0))),
        case("negative_full_link_busy", "Gen5 x16 under load", PASSES, snapshot()),
        *measured(),
    ]


def measured() -> list[Case]:
    """By measurement (`diagnose --active`): the pinned copies and the link read under their load."""
    return [
        case("positive_measured_gen3_x8_speed",
             "Gen5 x16 slot whose pinned copies measure at Gen3 x8 speed (about an eighth); the idle link read by NVML "
             "was ambiguous, the measurement is not",
             {**FIRES, "severity": "high", "certainty": "confirmed",
              "evidence_keys": ["pcie.gpus[0].h2d_pinned_gbps", "pcie.gpus[0].link_theoretical_gbps"],
              "text_contains": ["about 1/8 of the ~50 GB/s a healthy link measures", "Loading the served model"]},
             active_snapshot(pcie0(h2d_pinned_gbps=6.6, d2h_pinned_gbps=6.4, pcie_link_gen_under_load=None,
                                   pcie_link_width_under_load=None), *IDLE),
             config={"model_weight_bytes": 8.5e9}),
        case("positive_trained_low_under_load", "Under the copy's load NVML reads Gen4 x16 on a Gen5 x16 slot",
             {**FIRES, "severity": "high", "certainty": "confirmed",
              "evidence_keys": ["pcie.gpus[0].pcie_link_gen_under_load"],
              "text_contains": ["under that load the link ran at Gen4 x16"]},
             active_snapshot(pcie0(h2d_pinned_gbps=26.0, d2h_pinned_gbps=26.3, pcie_link_gen_under_load=4), *IDLE)),
        case("negative_measured_full_speed",
             "NVML saw an idle Gen1 link; pinned copies measure 85% of Gen5 x16: healthy, judged by measurement",
             PASSES, active_snapshot(*IDLE)),
    ]
