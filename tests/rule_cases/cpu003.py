"""CPU003, single core saturated (rules/catalog/cpu003_single_core_saturated.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    gpu0,
    process,
    snapshot,
)

CODE = "CPU003"


def cases() -> list[Case]:
    return [
        case("positive_gil_bound", "API server thread at 99% while the GPU sits at 35%",
             {**FIRES, "commands": ["--tokenizer-mode auto", "--api-server-count 2"]},
             snapshot(process(max_thread_cpu_pct=99.0), gpu0(utilization_gpu_pct=35.0))),
        case("negative_busy_gpu", "A busy engine-core thread next to a busy GPU is normal",
             PASSES, snapshot(process(max_thread_cpu_pct=99.0))),
    ]
