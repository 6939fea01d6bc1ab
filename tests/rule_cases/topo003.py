"""TOPO003, kv transfer dominates ttft (rules/catalog/topo003_kv_transfer_dominates_ttft.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case
from tests.rule_cases._topology import topology_snapshot as snap

CODE = "TOPO003"


def cases() -> list[Case]:
    nixl = {"engine": "vllm", "engine_version": "0.20.2", "disaggregation_role": "decode",
            "kv_connector": "NixlConnector"}
    return [
        case("positive_nixl_transfer_bound", "vLLM decode: TTFT 1.25 s, NIXL transfer 0.9 s, prefill 0.03 s",
             {**FIRES, "severity": "high", "evidence_keys": ["server_metrics.kv_transfer.time_mean_s"],
              "text_contains": ["NixlConnector", "900 ms", "72%"], "commands": ["--kv-cache-dtype fp8"]},
             snap("vllm_pd_decode_transfer_bound", config=nixl)),
        case("positive_transfer_on_prefill_peer", "SGLang: the transfer is timed on the prefill peer",
             {**FIRES, "evidence_keys": ["server_peers.peers[0].metrics.kv_transfer.time_mean_s"]},
             snap("sglang_pd_decode_idle", config={"engine": "sglang", "engine_version": "0.5.10",
                                                   "disaggregation_role": "decode"},
                  peers=(("sglang_pd_prefill_ok", None),)),
             config={"thresholds": {"TOPO003.min_share_of_ttft": 0.0, "TOPO003.min_transfer_ms": 10.0}}),
        case("positive_fast_ttft_is_an_opportunity", "The same transfer-bound split with a 1.25 s TTFT judged "
             "against a 2 s budget: LOW, an opportunity",
             {**FIRES, "severity": "low", "kind": "opportunity"},
             snap("vllm_pd_decode_transfer_bound", config=nixl),
             config={"thresholds": {"TOPO003.slow_ttft_ms": 2000.0}}),
        case("negative_fast_transfer", "vLLM decode: TTFT 0.24 s, NIXL transfer 0.02 s", PASSES,
             snap("vllm_pd_decode_healthy", config=nixl)),
        case("skipped_not_disaggregated", "No KV connector metrics",
             {"fires": False, "skipped_reason": "no KV connector"}, snap("vllm_dp4_balanced")),
    ]
