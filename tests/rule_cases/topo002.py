"""TOPO002, moe expert imbalance (rules/catalog/topo002_moe_expert_imbalance.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case
from tests.rule_cases._topology import topology_snapshot as snap

CODE = "TOPO002"


def cases() -> list[Case]:
    vllm_dp4 = {"engine": "vllm", "engine_version": "0.20.2", "data_parallel_size": 4}
    sglang_ep = {"engine": "sglang", "engine_version": "0.5.10", "expert_parallel_size": 4}
    return [
        case("positive_eplb_off", "SGLang EP=4 without EPLB: balancedness 0.42",
             {**FIRES, "evidence_keys": ["server_metrics.expert_balancedness"], "text_contains": ["0.42"], "commands": ["--enable-eplb"]},
             snap("sglang_dp4_eplb_skewed", config=sglang_ep)),
        case("positive_eplb_on", "SGLang EP=4 with EPLB on and still 0.42: rebalance more often",
             {**FIRES, "text_contains": ["--eplb-rebalance-num-iterations"]},
             snap("sglang_dp4_eplb_skewed", config={**sglang_ep, "enable_eplb": True})),
        case("negative_balanced", "SGLang EP=4, balancedness 0.9",
             PASSES, snap("sglang_dp4_eplb_skewed", config=sglang_ep), config={"thresholds": {"TOPO002.min_balancedness": 0.4}}),
        case("skipped_vllm", "vLLM exports no expert balance", {"fires": False, "skipped_reason": "no expert balance"},
             snap("vllm_dp4_balanced", config=vllm_dp4)),
    ]
