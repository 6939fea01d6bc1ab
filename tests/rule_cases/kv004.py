"""KV004, kv cache fp16 on fp8 hardware (rules/catalog/kv004_kv_cache_fp16_on_fp8_hardware.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cfg,
    gpu0,
    metrics,
    snapshot,
)

CODE = "KV004"


def cases() -> list[Case]:
    return [
        case("positive_bf16_kv_hopper", "16-bit KV on an H100 while preempting",
             {**FIRES, "commands": ["--kv-cache-dtype fp8"]},
             snapshot(cfg(kv_cache_dtype="auto"), metrics(num_preemptions_delta=9))),
        case("positive_bf16_kv_ada", "16-bit KV on an L40S (compute capability 8.9: vLLM runs FP8 natively "
             "from Ada on) while preempting", {**FIRES, "commands": ["--kv-cache-dtype fp8"]},
             snapshot(cfg(kv_cache_dtype="auto"), metrics(num_preemptions_delta=9),
                      gpu0(compute_capability=(8, 9), name="NVIDIA L40S"))),
        case("negative_ampere", "16-bit KV on an A100 (no FP8 tensor cores)",
             PASSES, snapshot(cfg(kv_cache_dtype="auto"), metrics(num_preemptions_delta=9),
                              gpu0(compute_capability=(8, 0)))),
        case("negative_fp8_already", "FP8 KV already", PASSES, snapshot(metrics(num_preemptions_delta=9))),
    ]
