"""TOPO005 (kv-offload-ineffective): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/TOPO005/.

A KV offload tier (vLLM's offloading connector or LMCache, SGLang's HiCache) keeps KV that no longer fits on the
GPU in host memory or storage, to load it back instead of recomputing it. It pays off when lookups find KV there;
it costs host memory and host-link traffic either way.
"""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import ServerMetricsData, TopologyData
from triage.core.report import Certainty, FindingKind, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._active_shared import pcie_pinned_gbps
from triage.rules.context import Context
from triage.rules.fmt import pct
from triage.rules.registry import rule


@rule("TOPO005", "kv-offload-ineffective", Severity.MEDIUM, ("server_metrics",), RuleDoc(
    what="A KV offload tier is in use and < 10% of the tokens looked up in it (>= 10k in the window) were found "
         "there; MEDIUM when its traffic is >= 50% of the host link measured by `diagnose --active` (pcie), "
         "LOW otherwise.",
    why="The tier saves prefill only on hits. With few hits its stores and lookups cost host memory and PCIe "
        "bandwidth that the rest of serving (inputs, sampled tokens, other offload) shares.",
    example="server_metrics.kv_offload.hit_rate = 0.015, kv_offload.gbytes_per_s = 2.4, pcie h2d 12 GB/s",
    fix="Check that the traffic reuses prefixes (a shared system prompt first, byte-identical); if it does not, "
        "turn the tier off or shrink it, and give the memory back.",
    references=("claim:vllm.external-prefix-cache-metrics", "claim:vllm.kv-offload-bytes-time",
                "claim:sglang.hicache-host-gauges", "docs/TOPOLOGIES.md"),
), thresholds=("TOPO005.min_queries", "TOPO005.min_hit_rate_frac", "TOPO005.link_busy_frac"))
def topo005(ctx: Context) -> Hit | None:
    off = ctx.need(ServerMetricsData).kv_offload
    if off is None:
        raise MissingInput("no KV offload tier in the /metrics (none configured, or nothing went through it)")
    if off.queries_delta is None or off.hit_rate is None:
        raise MissingInput(f"{off.tier} exports no lookup counts, so its hit rate is unknown")
    if off.queries_delta < ctx.th("TOPO005.min_queries") or off.hit_rate >= ctx.th("TOPO005.min_hit_rate_frac"):
        return None
    topo = ctx.seen(TopologyData)
    if topo.kv_offload is None and (topo.role in ("prefill", "decode") or topo.kv_connector):
        raise MissingInput("here the connector's cache counters count KV brought from the other instance, not an "
                           "offload tier")
    tier = topo.kv_offload or off.tier
    evidence: dict[str, Any] = {"server_metrics.kv_offload.tier": off.tier,
                                "server_metrics.kv_offload.queries_delta": off.queries_delta,
                                "server_metrics.kv_offload.hit_rate": round(off.hit_rate, 4),
                                "server_metrics.kv_offload.gbytes_per_s": off.gbytes_per_s}
    link = pcie_pinned_gbps(ctx)
    busy = link is not None and off.gbytes_per_s is not None and off.gbytes_per_s >= ctx.th("TOPO005.link_busy_frac") * link
    traffic = ""
    if off.gbytes_per_s is not None:
        traffic = f" It moved {off.gbytes_per_s:.2f} GB/s to and from the tier"
        if link is not None:
            evidence["pcie.min_pinned_gbps"] = link
            traffic += f", {pct(off.gbytes_per_s / link)} of the {link:.1f} GB/s the host link measured"
        traffic += "."
    return Hit(
        title="The KV offload tier is rarely hit" + (" and loads the host link" if busy else ""),
        message=f"Of {off.queries_delta:,.0f} tokens looked up in {tier}, {pct(off.hit_rate)} were found there."
                + traffic,
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.4 if busy else 0.1,
        severity=Severity.MEDIUM if busy else Severity.LOW,
        kind=FindingKind.PROBLEM if busy else FindingKind.OPPORTUNITY,
        fix=Fix("Check that the traffic reuses prefixes (the shared system prompt first, byte-identical). If it "
                "does not, the tier only costs: turn it off (drop --kv-offloading-size / the offload "
                "--kv-transfer-config, or --enable-hierarchical-cache) or shrink it, and give the host memory back.",
                ()))
