"""The deployment's shape (docs/TOPOLOGIES.md): what one /metrics window says per data-parallel rank, about the
KV transfer between prefill and decode instances and about a KV offload tier (inside `server_metrics`); the
other instances named by a repeated `--url` (`server_peers`); and the topology put together from the flags and
the metrics of all of them (`topology`)."""
from __future__ import annotations

from triage.core.probe_data.base import Payload, payload
from triage.core.probe_data.serving import ServerMetricsData


@payload
class PeerWindow:
    """Another instance of the same deployment (`--url` given again): its role and its /metrics window."""

    url: str | None = None
    role: str | None = None                          # prefill | decode | both | None (not known)
    role_source: str | None = None                   # "--url #fragment" | "metrics label"
    error: str | None = None                         # why it could not be scraped
    metrics: ServerMetricsData | None = None


@payload
class ServerPeersData(Payload):
    PROBE = "server_peers"

    peers: tuple[PeerWindow, ...] = ()


@payload
class TopologyData(Payload):
    """The deployment's shape, from the target's flags and /metrics and its peers'. Each field says what was
    seen; `evidence` says where each came from."""

    PROBE = "topology"

    engine: str | None = None
    data_parallel_size: int | None = None
    data_parallel_ranks: tuple[str, ...] = ()        # the rank label's values in /metrics
    dp_load_balance: str | None = None               # vLLM internal|hybrid|external; SGLang's method
    expert_parallel: bool | None = None
    enable_eplb: bool | None = None
    expert_balancedness: float | None = None         # mean/max expert load (1.0 even), where exported
    role: str | None = None                          # this instance: prefill | decode | both | None
    kv_connector: str | None = None
    kv_offload: str | None = None
    peer_roles: tuple[str, ...] = ()                 # "url=role" for each peer
    kind: str | None = None                          # single | data-parallel | disaggregated | ...
    evidence: tuple[str, ...] = ()
