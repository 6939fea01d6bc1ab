"""QUANT002, model does not fit (rules/catalog/quant002_model_does_not_fit.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cfg,
    logs,
    metrics,
    snapshot,
)

CODE = "QUANT002"


def cases() -> list[Case]:
    return [
        case("positive_kv_smaller_than_context", "KV holds 9120 tokens, max_model_len 32768",
             {**FIRES, "severity": "critical",
              "commands": ["vllm serve meta-llama/Llama-3.1-8B-Instruct --quantization fp8 --kv-cache-dtype fp8 "
                           "--max-model-len 8960", "triage plan --model llama-3.1-8b --gpu h100-sxm"]},
             snapshot(cfg(max_model_len=32768), logs(kv_cache_tokens=9120))),
        case("negative_pinned_by_override", "500 blocks pinned by --num-gpu-blocks-override under a 32K context: "
             "the size was set by hand, not left by the weights (KV008 names it)", PASSES,
             snapshot(cfg(max_model_len=32768),
                      metrics("cache_config", num_gpu_blocks=500, num_gpu_blocks_override=500), drop=("logs",))),
        case("positive_from_cache_config", "No log; cache_config says 500 blocks x 16 = 8000 tokens",
             {**FIRES, "evidence_keys": ["server_metrics.cache_config.num_gpu_blocks*block_size"]},
             snapshot(metrics("cache_config", num_gpu_blocks=500), drop=("logs",))),
        case("positive_sglang_capacity", "SGLang: max_total_num_tokens 6000 under a 16K context, no log",
             {**FIRES, "evidence_keys": ["server_metrics.kv_cache_capacity_tokens"], "commands": ["--context-length 5888"]},
             snapshot(cfg(engine="sglang", engine_version="0.5.2", max_model_len=16384),
                      metrics(engine="sglang", kv_cache_capacity_tokens=6000, cache_config={}), drop=("logs",))),
        case("negative_fits", "480K KV tokens for an 8K context", PASSES, snapshot()),
    ]
