"""GPU015, matmul throughput low (rules/catalog/gpu015_matmul_throughput_low.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._active import active_snapshot, matmul0
from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
)

CODE = "GPU015"


def cases() -> list[Case]:
    return [
        case("positive_matmul_throttled", "bf16 matmuls at 310 of 989 TFLOP/s",
             {**FIRES, "severity": "medium", "evidence_keys": ["matmul.gpus[0].bf16_tflops"],
              "text_contains": ["prefill ceiling"]},
             active_snapshot(matmul0(bf16_tflops=310.0, fp8_tflops=600.0)), config={"model_weight_bytes": 8.5e9}),
        case("negative_matmul_healthy", "bf16 720 (73%), fp8 1310 (66%) TFLOP/s", PASSES, active_snapshot()),
    ]
