"""TOPO001, dp rank imbalance (rules/catalog/topo001_dp_rank_imbalance.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case
from tests.rule_cases._topology import topology_snapshot as snap

CODE = "TOPO001"


def cases() -> list[Case]:
    vllm_dp4 = {"engine": "vllm", "engine_version": "0.20.2", "data_parallel_size": 4}
    return [
        case("positive_vllm_hot_rank", "vLLM DP=4: rank 2 queues 23 while ranks 0, 1, 3 have none",
             {**FIRES, "evidence_keys": ["server_metrics.ranks[2].num_requests_waiting_max"],
              "text_contains": ["rank 2", "23 requests waiting", "X-data-parallel-rank"],
              "commands": ["--data-parallel-external-lb"]},
             snap("vllm_dp4_hot_rank", config=vllm_dp4)),
        case("positive_vllm_external_lb", "vLLM DP=4 behind an external router: the router is named",
             {**FIRES, "text_contains": ["external mode", "router"]},
             snap("vllm_dp4_hot_rank", config={**vllm_dp4, "dp_load_balance": "external"})),
        case("positive_sglang_round_robin", "SGLang DP=4: rank 1 queues 18; the fix is a token-aware method",
             {**FIRES, "text_contains": ["rank 1"], "commands": ["--load-balance-method total_tokens"]},
             snap("sglang_dp4_eplb_skewed", config={"engine": "sglang", "engine_version": "0.5.10",
                                                    "data_parallel_size": 4})),
        case("negative_vllm_balanced", "vLLM DP=4, four ranks equally loaded", PASSES,
             snap("vllm_dp4_balanced", config=vllm_dp4)),
        case("skipped_one_rank", "A server without data parallelism",
             {"fires": False, "skipped_reason": "rank label"}, snap("vllm_pd_decode_healthy")),
    ]
