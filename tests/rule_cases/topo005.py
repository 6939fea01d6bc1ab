"""TOPO005, kv offload ineffective (rules/catalog/topo005_kv_offload_ineffective.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case
from tests.rule_cases._topology import topology_snapshot as snap

CODE = "TOPO005"


def cases() -> list[Case]:
    offload = {"engine": "vllm", "engine_version": "0.20.2", "kv_offload": "native", "kv_offload_size_gib": 64.0}
    return [
        case("positive_low_hit_opportunity", "1.5% of looked-up tokens found in the CPU tier; no PCIe figure",
             {**FIRES, "severity": "low", "text_contains": ["2% were found"]},
             snap("vllm_offload_low_hit", config=offload)),
        case("positive_low_hit_link_busy", "The same, moving 2.4 GB/s over a link measured at 3 GB/s",
             {**FIRES, "severity": "medium", "evidence_keys": ["pcie.min_pinned_gbps"]},
             snap("vllm_offload_low_hit", config=offload, pcie_gbps=3.0)),
        case("negative_hits", "A tier that finds half the lookups", PASSES,
             snap("vllm_offload_low_hit", config=offload), config={"thresholds": {"TOPO005.min_hit_rate_frac": 0.01}}),
        case("skipped_disaggregated", "On a decode instance the counters hold KV from the prefill side",
             {"fires": False, "skipped_reason": "other instance"},
             snap("vllm_offload_low_hit", config={"engine": "vllm", "disaggregation_role": "decode",
                                                  "kv_connector": "NixlConnector"})),
    ]
