"""KV006, gpu memory utilization low (rules/catalog/kv006_gpu_memory_utilization_low.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cfg,
    metrics,
    snapshot,
)

CODE = "KV006"


def cases() -> list[Case]:
    return [
        case("positive_low_util_kv_limited", "gpu_memory_utilization 0.7 while preempting",
             {**FIRES, "commands": ["--gpu-memory-utilization 0.92"]},
             snapshot(cfg(gpu_memory_utilization=0.7), metrics(num_preemptions_delta=4))),
        case("positive_sglang_low_fraction", "SGLang 0.5.23 at --mem-fraction-static 0.7 on an 80 GiB H100 "
             "while preempting: raised a few hundredths in SGLang's terms, not to 0.92",
             {**FIRES, "commands": ["--mem-fraction-static 0.74"], "text_contains": ["activations and CUDA graphs"]},
             snapshot(cfg(engine="sglang", engine_version="0.5.23", gpu_memory_utilization=0.7),
                      metrics(num_preemptions_delta=4))),
        case("negative_sglang_default_fraction", "SGLang at 0.87 on an 80 GiB GPU: what lies outside is its "
             "activation reserve, not unused VRAM", PASSES,
             snapshot(cfg(engine="sglang", engine_version="0.5.23", gpu_memory_utilization=0.87),
                      metrics(num_preemptions_delta=4))),
        case("positive_tgi_low_fraction", "TGI 3.3.7 at --cuda-memory-fraction 0.7 while preempting: back to "
             "its default, the whole GPU (1.0), not vLLM's 0.92",
             {**FIRES, "commands": ["--cuda-memory-fraction 1.0"], "text_contains": ["Raise it to 1.00."]},
             snapshot(cfg(engine="tgi", engine_version="3.3.7", gpu_memory_utilization=0.7),
                      metrics(num_preemptions_delta=4))),
        case("negative_low_util_no_pressure", "0.7 with plenty of KV room is a choice, not a problem",
             PASSES, snapshot(cfg(gpu_memory_utilization=0.7))),
    ]
