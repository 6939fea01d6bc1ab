"""GPU013, gpu lost (rules/catalog/gpu013_gpu_lost.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    gpu,
    snapshot,
)
from tests.rule_cases._healthy import healthy_gpu0
from triage.core.probe_data import GpuDevice

CODE = "GPU013"


def cases() -> list[Case]:
    return [
        case("positive_lost", "GPU 1 fell off the bus (NVML GPU_IS_LOST)",
             {**FIRES, "severity": "critical", "evidence_keys": ["gpu.gpus[1].lost"]},
             snapshot(gpu(gpus=(healthy_gpu0(),
                                 GpuDevice(index=1, name="NVIDIA H100 80GB HBM3", pci_bus_id="00000000:86:00.0",
                                           unsupported_fields=("*",), lost=True))))),
        case("negative_all_present", "Every GPU answers", PASSES, snapshot()),
    ]
