"""KV001, kv cache saturated (rules/catalog/kv001_kv_cache_saturated.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    Edit,
    bench,
    case,
    cfg,
    level,
    metrics,
    snapshot,
)
from tests.rule_cases._topology import topology_snapshot

CODE = "KV001"


def tiny_kv() -> tuple[Edit, ...]:
    """c=16 on a 640-token cache: 400-token prompts, 72-77% used, 15 waiting, one running (a real
    reference-engine run)."""
    return (level(2, input_tokens_mean=400.0, output_tokens_mean=64.0),
            level(2, "server", kv_cache_usage_frac_max=0.77, kv_cache_usage_frac_mean=0.72,
                  num_requests_waiting_max=15, num_requests_waiting_mean=12.5, num_requests_running_max=1,
                  num_requests_running_mean=1.0))


def cases() -> list[Case]:
    kv_sat = (metrics(kv_cache_usage_frac=0.97, kv_cache_usage_frac_max=0.99, num_requests_waiting=14,
                      num_requests_running=48),
              cfg(gpu_memory_utilization=0.85, kv_cache_dtype="auto", max_model_len=32768),
              metrics("cache_config", gpu_memory_utilization=0.85, cache_dtype="auto"))
    rag = (level(2, input_tokens_mean=3000.0, output_tokens_mean=256.0),
           level(2, "server", kv_cache_usage_frac_max=0.82, kv_cache_usage_frac_mean=0.78,
                 num_requests_waiting_max=9, num_requests_waiting_mean=3.0))
    small_cache = metrics("cache_config", num_gpu_blocks=1000)
    return [
        case("positive_saturated_with_queue", "KV at 99% with 14 waiting on vLLM 0.18",
             {**FIRES, "severity": "high", "certainty": "confirmed",
              "evidence_keys": ["server_metrics.kv_cache_usage_frac_max", "server_metrics.num_requests_waiting"],
              "commands": ["--gpu-memory-utilization 0.92", "--max-model-len 1024", "--kv-cache-dtype fp8"]},
             snapshot(*kv_sat), bench()),
        case("positive_sglang_at_its_ceiling", "SGLang on an 80 GiB H100 at --mem-fraction-static 0.87: "
             "raising it would eat the >= 10 GiB SGLang keeps for activations and CUDA graphs, so no 0.92",
             {**FIRES, "text_contains": ["already 0.87", "--chunked-prefill-size"]},
             snapshot(cfg(engine="sglang", engine_version="0.5.23", gpu_memory_utilization=0.87),
                      drop=("server_metrics",)),
             bench(level(3, "server", kv_cache_usage_frac_max=0.98, num_requests_waiting_max=30,
                         num_requests_waiting_mean=17.0))),
        case("positive_bench_only_sglang", "SGLang: saturated during the bench, no snapshot metrics; its "
             "--mem-fraction-static rises by a few hundredths, in SGLang's own terms, never to vLLM's 0.92",
             {**FIRES, "commands": ["--mem-fraction-static 0.84"],
              "evidence_keys": ["bench.c64.server.kv_cache_usage_frac_max"]},
             snapshot(cfg(engine="sglang", engine_version="0.5.2", gpu_memory_utilization=0.8),
                      drop=("server_metrics",)),
             bench(level(3, "server", kv_cache_usage_frac_max=0.98, num_requests_waiting_max=30,
                         num_requests_waiting_mean=17.0))),
        case("negative_full_but_no_queue", "KV at 96% but nothing waits: a well-used cache",
             PASSES, snapshot(metrics(kv_cache_usage_frac_max=0.96))),
        case("negative_queue_with_room", "Requests wait but KV is at 40% (SCHED002's case)",
             PASSES, snapshot(metrics(num_requests_waiting=10, kv_cache_usage_frac_max=0.4))),
        case("positive_no_room_for_next_request", "RAG traffic (3256-token requests) on a 16000-token cache: "
             "at 82% only 2880 tokens are free while 9 wait (likely: at the mean, 78%, a prompt would still fit)",
             {**FIRES, "certainty": "likely",
              "evidence_keys": ["server_metrics.cache_config.num_gpu_blocks*block_size", "derived.bench.c16.kv_free_tokens",
                                "bench.c16.input_tokens_mean+output_tokens_mean", "bench.c16.server.kv_cache_usage_frac_max",
                                "bench.c16.server.num_requests_waiting_max"],
              "text_contains": ["only 2880 of the KV cache's 16000 tokens were free", "3256 tokens"]},
             snapshot(small_cache, drop=("logs",)), bench(*rag)),
        case("positive_prompt_never_fits", "40 blocks x 16 = 640 tokens at 72-77% with 15 waiting and one "
             "running: not even a 400-token prompt fits in the free blocks (a real reference-engine run)",
             {**FIRES, "certainty": "confirmed",
              "evidence_keys": ["derived.bench.c16.kv_free_tokens_typical", "bench.c16.input_tokens_mean",
                                "bench.c16.server.kv_cache_usage_frac_mean", "bench.c16.server.num_requests_waiting_mean"],
              "text_contains": ["although usage stayed below 90%", "pins the cache at 40 blocks"]},
             snapshot(metrics("cache_config", num_gpu_blocks=40, num_gpu_blocks_override=40), drop=("logs",)), bench(*tiny_kv())),
        case("negative_queue_with_room_for_requests", "9 wait on the 16000-token cache at 70%: 4800 tokens free, "
             "1.5 requests' worth, so the cache is not what holds them back",
             PASSES, snapshot(small_cache, drop=("logs",)),
             bench(*rag, level(2, "server", kv_cache_usage_frac_max=0.70, kv_cache_usage_frac_mean=0.66))),
        case("skipped_no_metrics", "/metrics not reachable and no bench",
             {"fires": False, "skipped_reason": "server_metrics"},
             snapshot(status={"server_metrics": ("error", "GET /metrics: connection refused")})),
        case("negative_one_dp_rank_full", "vLLM DP=4: only rank 2's KV is full, an imbalance (TOPO001)",
             PASSES, topology_snapshot("vllm_dp4_hot_rank", config={"engine": "vllm", "engine_version": "0.20.2",
                                                                    "data_parallel_size": 4})),
    ]
