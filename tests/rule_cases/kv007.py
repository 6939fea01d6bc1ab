"""KV007, KV capacity below max_model_len (rules/catalog/kv007_kv_capacity_below_max_len.py): its fixture cases.
The figures are vLLM issue 7526's (V0) and tpu-inference PR 223's (V1); tests/incidents/ holds the whole logs."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case, cfg, gpu0, logs, snapshot

CODE = "KV007"


def _v0(max_len: int, kv: int) -> dict:
    return {"fact": "kv_below_max_len", "phase": "kv_alloc", "max_model_len": max_len, "kv_tokens": kv,
            "values": {"max_model_len": float(max_len), "kv_tokens": float(kv)}, "path": "vllm.log", "line_no": 4,
            "line": f"The model's max seq len ({max_len}) is larger than the maximum number of tokens that can be "
                    f"stored in KV cache ({kv}).", "claim": "vllm.log-kv-too-small-0.6"}


def _v1(max_len: int, needed: float, available: float, fits: int) -> dict:
    return {"fact": "kv_below_max_len", "phase": "kv_alloc", "max_model_len": max_len, "kv_tokens": fits,
            "kv_needed_gib": needed, "kv_available_gib": available, "path": "vllm.log", "line_no": 9,
            "line": f"To serve at least one request with the models's max seq len ({max_len}), ({needed:.2f} GiB KV "
                    f"cache is needed, which is larger than the available KV cache memory ({available:.2f} GiB).",
            "claim": "vllm.log-kv-too-small-0.10"}


def cases() -> list[Case]:
    return [
        case("positive_v0_caps_the_context", "vLLM 0.6: 30000 tokens configured, 3984 fit",
             {**FIRES, "severity": "critical", "commands": ["--max-model-len 3840"],
              "evidence_keys": ["logs.kv_below_max_len.at", "logs.kv_below_max_len.kv_tokens"]},
             snapshot(logs(engine="vllm", engine_version="0.6.6", events=(_v0(30000, 3984),)),
                      cfg(engine_version="0.6.6"))),
        case("positive_v1_share_fits", "vLLM 0.10: 2.4 GiB short on an 80 GiB GPU at 0.90: 0.94 fits",
             {**FIRES, "commands": ["--max-model-len 49920", "--gpu-memory-utilization 0.94"],
              "evidence_keys": ["derived.gpu_memory_utilization_needed"]},
             snapshot(logs(engine="vllm", engine_version="0.10.2", events=(_v1(65536, 10.0, 7.6, 49920),)),
                      cfg(engine_version="0.10.2", gpu_memory_utilization=0.9))),
        case("positive_v1_share_would_not_fit", "vLLM 0.10: 15.3 GiB short on a 24 GiB GPU: no share is offered",
             {**FIRES, "commands": ["--max-model-len 5632"], "text_contains": ["a larger memory share is not offered"]},
             snapshot(logs(engine="vllm", engine_version="0.10.2", events=(_v1(131072, 16.0, 0.71, 5632),)),
                      cfg(engine_version="0.10.2", gpu_memory_utilization=0.9),
                      gpu0(memory_total_bytes=24 * 2**30))),
        case("opportunity_sglang_started_below_its_context", "SGLang started with 60000 KV tokens and a 131072-token "
             "context", {**FIRES, "severity": "low", "kind": "opportunity", "commands": ["--context-length 59904"]},
             snapshot(logs(engine="sglang", kv_cache_tokens=60000, config={"max_model_len": 131072}),
                      cfg(engine="sglang", engine_version="0.5.9", max_model_len=None))),
        case("negative_a_start_that_fit", "The log shows a healthy start", PASSES,
             snapshot(logs(engine="vllm", engine_version="0.10.2"))),
        case("skipped_no_log", "No server log", {"fires": False, "skipped_reason": "logs"},
             snapshot(drop=("logs",))),
    ]
