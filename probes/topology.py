"""The `topology` probe: the deployment's shape put together from what the earlier phases saw (the target's
flags in `server_config`, its /metrics in `server_metrics`, its peers in `server_peers`). It reads nothing
itself. `diagnose` prints it; rules TOPO001-TOPO005 read it (docs/TOPOLOGIES.md)."""
from __future__ import annotations

import time

from triage.core.probe_data import ServerConfigData, ServerMetricsData, ServerPeersData, TopologyData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.engines import get as engine_by_name
from triage.probes.registry import ProbeRun, register


def _kind(dp: int | None, disaggregated: bool, peer_roles: list[str], ep: bool | None, offload: str | None) -> str:
    parts = []
    if disaggregated or any(r in ("prefill", "decode") for r in peer_roles):
        parts.append("disaggregated prefill/decode")
    if dp and dp > 1:
        parts.append(f"data parallel x{dp}")
    if ep:
        parts.append("expert parallel")
    if offload:
        parts.append("KV offload")
    return ", ".join(parts) or "single instance"


def derive_topology(cfg: ServerConfigData | None, metrics: ServerMetricsData | None,
                    peers: ServerPeersData | None, role_hint: str | None = None) -> TopologyData:
    cfg = cfg or ServerConfigData()
    metrics = metrics or ServerMetricsData()
    sources = cfg.sources or {}
    evidence: list[str] = []

    def said(field: str, value: object, where: str | None) -> None:
        if value not in (None, False, ()):
            evidence.append(f"{field} = {value} ({where or 'unknown'})")

    ranks = tuple(r.rank for r in metrics.ranks if r.rank is not None)
    dp = cfg.data_parallel_size if cfg.data_parallel_size and cfg.data_parallel_size > 1 else None
    dp_source = sources.get("data_parallel_size")
    if dp is None and len(ranks) > 1:
        dp, dp_source = len(ranks), "/metrics rank label"
    said("data_parallel_size", dp, dp_source)
    module = engine_by_name(cfg.engine or metrics.engine)
    tmap = module.topology if module is not None else None
    balance = cfg.dp_load_balance or (tmap.default_dp_balance if dp and tmap is not None else None)
    said("dp_load_balance", balance, sources.get("dp_load_balance", "engine default"))
    ep = bool(cfg.expert_parallel) or bool(cfg.expert_parallel_size and cfg.expert_parallel_size > 1) or None
    said("expert_parallel", ep, sources.get("expert_parallel") or sources.get("expert_parallel_size"))
    role, role_source = cfg.disaggregation_role, sources.get("disaggregation_role")
    if role is None and role_hint:
        role, role_source = role_hint, "--url #fragment"
    if role is None and metrics.role:
        role, role_source = metrics.role, "/metrics label"
    said("role", role, role_source)
    connector = cfg.kv_connector or (metrics.kv_transfer.connector if metrics.kv_transfer else None)
    said("kv_connector", connector, sources.get("kv_connector") or (metrics.kv_transfer.metric if metrics.kv_transfer else None))
    # vLLM counts KV a disaggregation connector brings from the other instance in the same "external" counters
    # (claim vllm.external-prefix-cache-metrics): they say "offload" only without a transfer connector.
    disaggregated = role in ("prefill", "decode") or metrics.kv_transfer is not None
    offload = cfg.kv_offload or (metrics.kv_offload.tier if metrics.kv_offload and not disaggregated else None)
    said("kv_offload", offload, sources.get("kv_offload") or ("/metrics" if metrics.kv_offload else None))
    said("expert_balancedness", None if metrics.expert_balancedness is None else round(metrics.expert_balancedness, 3),
         "/metrics eplb summary")
    peer_list = peers.peers if peers else ()
    peer_roles = [p.role or "unknown" for p in peer_list]
    return TopologyData(
        engine=cfg.engine or metrics.engine, data_parallel_size=dp, data_parallel_ranks=ranks, dp_load_balance=balance,
        expert_parallel=ep, enable_eplb=cfg.enable_eplb, expert_balancedness=metrics.expert_balancedness,
        role=role, kv_connector=connector, kv_offload=offload,
        peer_roles=tuple(f"{p.url}={p.role or 'unknown'}" for p in peer_list),
        kind=_kind(dp, disaggregated, peer_roles, ep, offload), evidence=tuple(evidence))


@register("topology", phase=3, order=64, timeout_s=lambda run: run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    start = time.perf_counter()
    cfg, metrics = run.earlier_payload(ServerConfigData), run.earlier_payload(ServerMetricsData)
    peers = run.earlier_payload(ServerPeersData)
    if cfg is None and metrics is None:
        return ProbeResult("topology", ProbeStatus.UNSUPPORTED, 0.0, "no server flags and no /metrics to read it from")
    data = derive_topology(cfg, metrics, peers, run.role_hint)
    return ProbeResult("topology", ProbeStatus.OK, time.perf_counter() - start, None, data)
