"""Rule fixtures for the deployment topologies (TOPO001-TOPO005, docs/TOPOLOGIES.md). tests/rules_fixtures.py
calls `define(...)`; `python -m tests.rules_fixtures` writes them.

Each case's `server_metrics` is the window the real probe computes over the /metrics captures of
tests/fixtures/topologies/ (scripts/make_topology_captures.py: exposition from the engines' own definitions,
values a scenario), and its `topology` what the topology probe derives from it: the fixtures go through the
same parser, window and derivation as `triage diagnose`.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).resolve().parent / "fixtures" / "topologies"


def window(name: str) -> Any:
    """The server_metrics payload of a 10 s window over the capture pair `name`."""
    from triage.probes.metrics_window import window_delta
    from triage.probes.prom import normalise, parse_metrics

    before, after = (normalise(parse_metrics((CAPTURES / f"{name}.{k}.prom").read_text())) for k in ("before", "after"))
    return window_delta(before, after, 10.0, url=f"capture:{name}")


def _probe(name: str, data: Any) -> dict[str, Any]:
    return {"name": name, "status": "ok", "duration_s": 0.05, "reason": None, "data": data.to_dict()}


def topology_snapshot(snapshot: Callable[..., dict[str, Any]], name: str, config: dict[str, Any] | None = None,
                      peers: tuple[tuple[str, str | None], ...] = (), pcie_gbps: float | None = None) -> dict[str, Any]:
    """The healthy snapshot with the capture's window as server_metrics, `config` over server_config, the
    peers' windows (capture, role from '#fragment' or None) as server_peers, and the topology derived."""
    from triage.core.probe_data import PeerWindow, ServerConfigData, ServerPeersData
    from triage.probes.topology import derive_topology

    snap = snapshot()
    metrics = window(name)
    probes = [p for p in snap["probes"] if p["name"] not in ("server_metrics", "server_config")]
    base_cfg = next(p["data"] for p in snap["probes"] if p["name"] == "server_config")
    cfg = ServerConfigData.read({**base_cfg, **(config or {})}, "fixture")
    peer_data = None
    if peers:
        rows = []
        for peer, role in peers:
            m = window(peer)
            rows.append(PeerWindow(url=f"capture:{peer}", role=role or m.role,
                                   role_source="--url #fragment" if role else ("metrics label" if m.role else None),
                                   metrics=m))
        peer_data = ServerPeersData(peers=tuple(rows))
        probes.append(_probe("server_peers", peer_data))
    probes += [_probe("server_metrics", metrics), _probe("server_config", cfg),
               _probe("topology", derive_topology(cfg, metrics, peer_data))]
    if pcie_gbps is not None:
        probes.append({"name": "pcie", "status": "ok", "duration_s": 1.0, "reason": None,
                       "data": {"gpus": [{"index": 0, "h2d_pinned_gbps": pcie_gbps, "d2h_pinned_gbps": pcie_gbps}]}})
    return {"probes": probes}


def define(case: Callable[..., None], snapshot: Callable[..., dict[str, Any]], FIRES: dict[str, Any],
           PASSES: dict[str, Any]) -> None:
    def snap(name: str, **kw: Any) -> dict[str, Any]:
        return topology_snapshot(snapshot, name, **kw)

    vllm_dp4 = {"engine": "vllm", "engine_version": "0.20.2", "data_parallel_size": 4}
    case("TOPO001", "positive_vllm_hot_rank", "vLLM DP=4: rank 2 queues 23 while ranks 0, 1, 3 have none",
         {**FIRES, "evidence_keys": ["server_metrics.ranks[2].num_requests_waiting_max"],
          "text_contains": ["rank 2", "23 requests waiting", "X-data-parallel-rank"],
          "commands": ["--data-parallel-external-lb"]},
         snap("vllm_dp4_hot_rank", config=vllm_dp4))
    case("TOPO001", "positive_vllm_external_lb", "vLLM DP=4 behind an external router: the router is named",
         {**FIRES, "text_contains": ["external mode", "router"]},
         snap("vllm_dp4_hot_rank", config={**vllm_dp4, "dp_load_balance": "external"}))
    case("TOPO001", "positive_sglang_round_robin", "SGLang DP=4: rank 1 queues 18; the fix is a token-aware method",
         {**FIRES, "text_contains": ["rank 1"], "commands": ["--load-balance-method total_tokens"]},
         snap("sglang_dp4_eplb_skewed", config={"engine": "sglang", "engine_version": "0.5.10",
                                                "data_parallel_size": 4}))
    case("TOPO001", "negative_vllm_balanced", "vLLM DP=4, four ranks equally loaded", PASSES,
         snap("vllm_dp4_balanced", config=vllm_dp4))
    case("KV001", "negative_one_dp_rank_full", "vLLM DP=4: only rank 2's KV is full, an imbalance (TOPO001)",
         PASSES, snap("vllm_dp4_hot_rank", config=vllm_dp4))
    case("TOPO001", "skipped_one_rank", "A server without data parallelism",
         {"fires": False, "skipped_reason": "rank label"}, snap("vllm_pd_decode_healthy"))

    sglang_ep = {"engine": "sglang", "engine_version": "0.5.10", "expert_parallel_size": 4}
    case("TOPO002", "positive_eplb_off", "SGLang EP=4 without EPLB: balancedness 0.42",
         {**FIRES, "evidence_keys": ["server_metrics.expert_balancedness"], "text_contains": ["0.42"], "commands": ["--enable-eplb"]},
         snap("sglang_dp4_eplb_skewed", config=sglang_ep))
    case("TOPO002", "positive_eplb_on", "SGLang EP=4 with EPLB on and still 0.42: rebalance more often",
         {**FIRES, "text_contains": ["--eplb-rebalance-num-iterations"]},
         snap("sglang_dp4_eplb_skewed", config={**sglang_ep, "enable_eplb": True}))
    case("TOPO002", "negative_balanced", "SGLang EP=4, balancedness 0.9",
         PASSES, snap("sglang_dp4_eplb_skewed", config=sglang_ep), config={"thresholds": {"TOPO002.min_balancedness": 0.4}})
    case("TOPO002", "skipped_vllm", "vLLM exports no expert balance", {"fires": False, "skipped_reason": "no expert balance"},
         snap("vllm_dp4_balanced", config=vllm_dp4))

    nixl = {"engine": "vllm", "engine_version": "0.20.2", "disaggregation_role": "decode",
            "kv_connector": "NixlConnector"}
    case("TOPO003", "positive_nixl_transfer_bound", "vLLM decode: TTFT 1.25 s, NIXL transfer 0.9 s, prefill 0.03 s",
         {**FIRES, "severity": "high", "evidence_keys": ["server_metrics.kv_transfer.time_mean_s"],
          "text_contains": ["NixlConnector", "900 ms", "72%"], "commands": ["--kv-cache-dtype fp8"]},
         snap("vllm_pd_decode_transfer_bound", config=nixl))
    case("TOPO003", "positive_transfer_on_prefill_peer", "SGLang: the transfer is timed on the prefill peer",
         {**FIRES, "evidence_keys": ["server_peers.peers[0].metrics.kv_transfer.time_mean_s"]},
         snap("sglang_pd_decode_idle", config={"engine": "sglang", "engine_version": "0.5.10",
                                               "disaggregation_role": "decode"},
              peers=(("sglang_pd_prefill_ok", None),)),
         config={"thresholds": {"TOPO003.min_share_of_ttft": 0.0, "TOPO003.min_transfer_ms": 10.0}})
    case("TOPO003", "negative_fast_transfer", "vLLM decode: TTFT 0.24 s, NIXL transfer 0.02 s", PASSES,
         snap("vllm_pd_decode_healthy", config=nixl))
    case("TOPO003", "skipped_not_disaggregated", "No KV connector metrics",
         {"fires": False, "skipped_reason": "no KV connector"}, snap("vllm_dp4_balanced"))

    sg = {"engine": "sglang", "engine_version": "0.5.10"}
    case("TOPO004", "positive_prefill_starved", "SGLang 1P:1D: prefill queues 41 with KV 96%, decode idles at 12%",
         {**FIRES, "text_contains": ["prefill side is saturated", "one more prefill instance"]},
         snap("sglang_pd_decode_idle", config={**sg, "disaggregation_role": "decode"},
              peers=(("sglang_pd_prefill_saturated", None),)))
    case("TOPO004", "positive_roles_from_fragments", "Roles named by '#prefill' on the peer's URL",
         {**FIRES}, snap("sglang_pd_decode_idle", config=sg, peers=(("sglang_pd_prefill_saturated", "prefill"),)))
    case("TOPO004", "negative_matched_split", "Decode busy, prefill with room: the split fits", PASSES,
         snap("sglang_pd_decode_busy", config={**sg, "disaggregation_role": "decode"},
              peers=(("sglang_pd_prefill_ok", None),)))
    case("TOPO004", "skipped_no_peer", "Only the decode instance in view",
         {"fires": False, "skipped_reason": "server_peers"},
         snap("sglang_pd_decode_idle", config={**sg, "disaggregation_role": "decode"}))

    offload = {"engine": "vllm", "engine_version": "0.20.2", "kv_offload": "native", "kv_offload_size_gib": 64.0}
    case("TOPO005", "positive_low_hit_opportunity", "1.5% of looked-up tokens found in the CPU tier; no PCIe figure",
         {**FIRES, "severity": "low", "text_contains": ["2% were found"]},
         snap("vllm_offload_low_hit", config=offload))
    case("TOPO005", "positive_low_hit_link_busy", "The same, moving 2.4 GB/s over a link measured at 3 GB/s",
         {**FIRES, "severity": "medium", "evidence_keys": ["pcie.min_pinned_gbps"]},
         snap("vllm_offload_low_hit", config=offload, pcie_gbps=3.0))
    case("TOPO005", "negative_hits", "A tier that finds half the lookups", PASSES,
         snap("vllm_offload_low_hit", config=offload), config={"thresholds": {"TOPO005.min_hit_rate_frac": 0.01}})
    case("TOPO005", "skipped_disaggregated", "On a decode instance the counters hold KV from the prefill side",
         {"fires": False, "skipped_reason": "other instance"},
         snap("vllm_offload_low_hit", config={"engine": "vllm", "disaggregation_role": "decode",
                                              "kv_connector": "NixlConnector"}))
