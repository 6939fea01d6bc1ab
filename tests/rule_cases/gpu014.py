"""GPU014, hbm bandwidth low (rules/catalog/gpu014_hbm_bandwidth_low.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._active import active_snapshot, hbm0
from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
)

CODE = "GPU014"


def cases() -> list[Case]:
    return [
        case("positive_hbm_half_spec", "H100 SXM copies 1450 GB/s of 3350 (power-capped memory clock)",
             {**FIRES, "severity": "high", "certainty": "confirmed",
              "evidence_keys": ["hbm.gpus[0].copy_bandwidth_gbps", "derived.decode_tokens_per_s_bound_measured"],
              "text_contains": ["batch-1 decode ceiling falls from 394 to 171 tokens/s"]},
             active_snapshot(hbm0(copy_bandwidth_gbps=1450.0, share_of_spec=0.433)), config={"model_weight_bytes": 8.5e9}),
        case("positive_no_weights_says_how", "Slow HBM, model size unknown: the message says how to get the cost",
             {**FIRES, "text_contains": ["[model] weight_bytes"]},
             active_snapshot(hbm0(copy_bandwidth_gbps=1450.0))),
        case("negative_hbm_healthy", "2905 GB/s of 3350 (87%)", PASSES, active_snapshot()),
        case("skipped_unknown_gpu", "A GPU the spec table does not know",
             {"fires": False, "skipped_reason": "spec table"},
             active_snapshot(hbm0(name="NVIDIA A16", spec_bandwidth_gbps=None))),
    ]
