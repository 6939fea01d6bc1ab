"""KV003, max model len oversized (rules/catalog/kv003_max_model_len_oversized.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    cfg,
    levels,
    metrics,
    run_config,
    snapshot,
)

CODE = "KV003"


def cases() -> list[Case]:
    return [
        case("positive_oversized", "max_model_len 32768 for 4096-token traffic while KV-limited",
             {**FIRES, "commands": ["--max-model-len 5120"], "evidence_keys": ["server_config.max_model_len"]},
             snapshot(cfg(max_model_len=32768), metrics(num_preemptions_delta=12)),
             bench(run_config(input_len=3584, output_len=512), levels(input_tokens_mean=3584.0),
                   levels(output_tokens_mean=512.0))),
        case("negative_not_kv_limited", "Oversized, but KV has room: nothing to gain",
             PASSES, snapshot(cfg(max_model_len=131072)), bench()),
        case("negative_right_sized", "max_model_len 2048 for 640-token traffic (3.2x) while preempting",
             PASSES, snapshot(cfg(max_model_len=2048), metrics(num_preemptions_delta=5)), bench()),
    ]
