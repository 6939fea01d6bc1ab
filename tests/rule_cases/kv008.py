"""KV008, KV cache pinned by a block-count override (rules/catalog/kv008_kv_cache_pinned_by_override.py): its
fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cfg,
    metrics,
    process,
    snapshot,
)

CODE = "KV008"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PINNED = ("vllm", "serve", MODEL, "--num-gpu-blocks-override", "40", "--max-model-len", "1024")


def cases() -> list[Case]:
    return [
        case("positive_one_request_cannot_fit", "40 blocks x 16 = 640 tokens pinned under max_model_len 1024: "
             "the command without the override is the fix",
             {**FIRES, "severity": "critical", "certainty": "confirmed",
              "evidence_keys": ["server_metrics.cache_config.num_gpu_blocks_override", "server_config.max_model_len"],
              "commands": [f"vllm serve {MODEL} --max-model-len 1024"]},
             snapshot(cfg(max_model_len=1024), process(cmdline=PINNED),
                      metrics("cache_config", num_gpu_blocks=40, num_gpu_blocks_override=40), drop=("logs",))),
        case("positive_preempting", "a pinned cache that holds a full request, while the engine preempts",
             {**FIRES, "severity": "high", "evidence_keys": ["server_metrics.num_preemptions_delta"]},
             snapshot(metrics("cache_config", num_gpu_blocks=2000, num_gpu_blocks_override=2000),
                      metrics(num_preemptions_delta=12), drop=("logs",))),
        case("negative_pinned_with_room", "a pinned cache with room and no pressure: a choice, not a problem",
             PASSES, snapshot(metrics("cache_config", num_gpu_blocks=30000, num_gpu_blocks_override=30000),
                              drop=("logs",))),
        case("negative_no_override", "the memory share sizes the cache", PASSES, snapshot()),
    ]
