"""TOPO004, pd ratio imbalance (rules/catalog/topo004_pd_ratio_imbalance.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case
from tests.rule_cases._topology import topology_snapshot as snap

CODE = "TOPO004"


def cases() -> list[Case]:
    sg = {"engine": "sglang", "engine_version": "0.5.10"}
    return [
        case("positive_prefill_starved", "SGLang 1P:1D: prefill queues 41 with KV 96%, decode idles at 12%",
             {**FIRES, "text_contains": ["prefill side is saturated", "one more prefill instance"]},
             snap("sglang_pd_decode_idle", config={**sg, "disaggregation_role": "decode"},
                  peers=(("sglang_pd_prefill_saturated", None),))),
        case("positive_roles_from_fragments", "Roles named by '#prefill' on the peer's URL",
             {**FIRES}, snap("sglang_pd_decode_idle", config=sg, peers=(("sglang_pd_prefill_saturated", "prefill"),))),
        case("negative_matched_split", "Decode busy, prefill with room: the split fits", PASSES,
             snap("sglang_pd_decode_busy", config={**sg, "disaggregation_role": "decode"},
                  peers=(("sglang_pd_prefill_ok", None),))),
        case("skipped_no_peer", "Only the decode instance in view",
             {"fires": False, "skipped_reason": "server_peers"},
             snap("sglang_pd_decode_idle", config={**sg, "disaggregation_role": "decode"})),
    ]
