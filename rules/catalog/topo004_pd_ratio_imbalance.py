"""TOPO004 (pd-ratio-imbalance): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/TOPO004/.

A disaggregated deployment splits its GPUs into prefill and decode instances. When the split does not match the
traffic, one side queues while the other idles. Seen only with both sides' metrics: the target's and those of
the other instances given with `--url` again (each one's role from its flags, its labels, or `#prefill` /
`#decode` after its URL).
"""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import ServerMetricsData, ServerPeersData, TopologyData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context
from triage.rules.registry import rule

Side = list[tuple[str, ServerMetricsData]]     # (evidence key, the instance's /metrics window)


def _sides(ctx: Context) -> tuple[Side, Side]:
    """(the prefill instances, the decode instances) in view: the target by its role, then the peers."""
    instances = [(ctx.seen(TopologyData).role, "server_metrics", ctx.need(ServerMetricsData))]
    instances += [(p.role, f"server_peers.peers[{i}].metrics", p.metrics)
                  for i, p in enumerate(ctx.seen(ServerPeersData).peers) if p.metrics is not None]
    return ([(k, m) for role, k, m in instances if role == "prefill"],
            [(k, m) for role, k, m in instances if role == "decode"])


def _saturated(ctx: Context, m: ServerMetricsData) -> bool:
    return (m.num_requests_waiting_max or 0) >= ctx.th("TOPO004.min_queue") or \
        (m.kv_cache_usage_frac_max or 0) >= ctx.th("TOPO004.kv_full_frac")


def _idle(ctx: Context, m: ServerMetricsData) -> bool:
    return (m.num_requests_waiting_max or 0) == 0 and m.kv_cache_usage_frac_max is not None and \
        m.kv_cache_usage_frac_max <= ctx.th("TOPO004.kv_roomy_frac")


@rule("TOPO004", "pd-ratio-imbalance", Severity.MEDIUM, ("server_metrics", "server_peers"), RuleDoc(
    what="With prefill and decode instances both in view, every instance of one side is saturated (>= 4 requests "
         "waiting, or KV >= 90%) while every instance of the other is idle (nothing waiting, KV <= 50%).",
    why="Requests wait on the saturated side while the other side's GPUs have nothing to do: the split of GPUs "
        "between prefill and decode does not match the traffic's prompt and output lengths.",
    example="prefill: num_requests_waiting_max 41, KV 96%; decode: 0 waiting, KV 12%",
    fix="Move capacity to the saturated side: one more prefill instance (or fewer decode ones) when prefill "
        "queues, the other way round when decode does.",
    references=("claim:sglang.metrics-engine-type-label", "claim:vllm.kv-transfer-config", "docs/TOPOLOGIES.md"),
), thresholds=("TOPO004.min_queue", "TOPO004.kv_full_frac", "TOPO004.kv_roomy_frac"))
def topo004(ctx: Context) -> Hit | None:
    prefill, decode = _sides(ctx)
    if not prefill or not decode:
        raise MissingInput("both a prefill and a decode instance are needed in view (give each with --url, "
                           "the role after '#' where the instance's own metrics do not name it)")
    def starved(busy_side: Side, idle_side: Side) -> bool:
        return all(_saturated(ctx, m) for _, m in busy_side) and all(_idle(ctx, m) for _, m in idle_side)

    if starved(prefill, decode):
        busy, idle, busy_side, idle_side = "prefill", "decode", prefill, decode
    elif starved(decode, prefill):
        busy, idle, busy_side, idle_side = "decode", "prefill", decode, prefill
    else:
        return None
    evidence: dict[str, Any] = {}
    for side, instances in ((busy, busy_side), (idle, idle_side)):
        for key, m in instances:
            evidence[f"{key}.role"] = side
            evidence[f"{key}.num_requests_waiting_max"] = m.num_requests_waiting_max
            evidence[f"{key}.kv_cache_usage_frac_max"] = m.kv_cache_usage_frac_max
            evidence[f"{key}.num_requests_running"] = m.num_requests_running
    n_busy, n_idle = len(busy_side), len(idle_side)
    worst_q = max(m.num_requests_waiting_max or 0 for _, m in busy_side)
    worst_kv = max(m.kv_cache_usage_frac_max or 0 for _, m in busy_side)
    them = f"the {busy} instance" if n_busy == 1 else f"all {n_busy} {busy} instances"
    others = f"the {idle} instance has" if n_idle == 1 else f"all {n_idle} {idle} instances have"
    return Hit(
        title=f"The {busy} side is saturated while the {idle} side idles",
        message=f"The {busy} side is saturated: {them} in view had up to {worst_q:g} requests waiting and a KV "
                f"cache up to {worst_kv:.0%} full, while {others} nothing waiting and room in KV. The "
                f"{len(prefill)}:{len(decode)} prefill:decode split does not match this traffic.",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.5,
        fix=Fix(f"Move a GPU set from {idle} to {busy}: start one more {busy} instance (or stop one {idle} "
                f"instance) and check again under the same load; the ratio that fits depends on the prompt and "
                "output lengths.", ()))
