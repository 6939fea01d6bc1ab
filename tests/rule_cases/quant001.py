"""QUANT001, fp16 on fp8 hardware (rules/catalog/quant001_fp16_on_fp8_hardware.py): its fixture cases."""
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

CODE = "QUANT001"


def cases() -> list[Case]:
    return [
        case("opportunity_bf16_h100_healthy", "bf16, no quantization flag, on a healthy H100: an "
             "opportunity, not a problem", {**FIRES, "severity": "low", "kind": "opportunity",
                                            "commands": ["--quantization fp8"],
                                            "text_contains": ["`--dtype fp8` is not accepted"]},
             snapshot(cfg(quantization=None), cfg("sources", quantization="cmdline"))),
        case("positive_bf16_h100_kv_pressure", "bf16 on an H100 whose KV cache is 97% full",
             {**FIRES, "severity": "medium", "kind": "problem",
              "evidence_keys": ["server_metrics.kv_cache_usage_frac_max"]},
             snapshot(cfg(quantization=None), cfg("sources", quantization="cmdline"),
                      metrics(kv_cache_usage_frac_max=0.97))),
        case("positive_no_flag_seen_hedges", "Quantization only assumed (engine default): possible, hedged",
             {**FIRES, "certainty": "possible", "text_contains": ["pre-quantized checkpoint needs no flag"]},
             snapshot(cfg(quantization=None), cfg("sources", quantization="default"))),
        case("negative_fp8", "Already FP8", PASSES, snapshot()),
        case("negative_a100", "bf16 on an A100 (no native FP8)",
             PASSES, snapshot(cfg(quantization=None), gpu0(compute_capability=(8, 0)))),
    ]
