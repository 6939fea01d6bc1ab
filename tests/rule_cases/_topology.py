"""Snapshots of the deployment topologies (TOPO001-TOPO005, docs/TOPOLOGIES.md).

Each case's `server_metrics` is the window the real probe computes over the /metrics captures of
tests/fixtures/topologies/ (scripts/make_topology_captures.py: exposition from the engines' own definitions,
values a scenario), and its `topology` what the topology probe derives from it: the fixtures go through the
same parser, window and derivation as `triage diagnose`.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tests.rule_cases._build import snapshot
from tests.rule_cases._healthy import healthy_probes
from triage.core.probe_data import PcieData, PcieGpu, PeerWindow, ServerMetricsData, ServerPeersData
from triage.core.snapshot import Snapshot

CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "topologies"


def window(name: str) -> ServerMetricsData:
    """The server_metrics payload of a 10 s window over the capture pair `name`."""
    from triage.probes.metrics_window import window_delta
    from triage.probes.prom import normalise, parse_metrics

    before, after = (normalise(parse_metrics((CAPTURES / f"{name}.{k}.prom").read_text())) for k in ("before", "after"))
    return window_delta(before, after, 10.0, url=f"capture:{name}")


def _peers(peers: tuple[tuple[str, str | None], ...]) -> ServerPeersData:
    rows = []
    for peer, role in peers:
        m = window(peer)
        rows.append(PeerWindow(url=f"capture:{peer}", role=role or m.role,
                               role_source="--url #fragment" if role else ("metrics label" if m.role else None),
                               metrics=m))
    return ServerPeersData(peers=tuple(rows))


def topology_snapshot(name: str, config: dict[str, Any] | None = None, peers: tuple[tuple[str, str | None], ...] = (),
                      pcie_gbps: float | None = None) -> Snapshot:
    """The healthy snapshot with the capture's window as server_metrics, `config` (ServerConfigData fields)
    over server_config, the peers' windows (capture, role from '#fragment' or None) as server_peers, and the
    topology derived."""
    from triage.probes.topology import derive_topology

    probes = healthy_probes()
    cfg = dataclasses.replace(probes.pop("server_config"), **(config or {}))
    del probes["server_metrics"]
    metrics = window(name)
    peer_data = _peers(peers) if peers else None
    if peer_data is not None:
        probes["server_peers"] = peer_data
    probes.update(server_metrics=metrics, server_config=cfg, topology=derive_topology(cfg, metrics, peer_data))
    if pcie_gbps is not None:
        probes["pcie"] = PcieData(gpus=(PcieGpu(index=0, h2d_pinned_gbps=pcie_gbps, d2h_pinned_gbps=pcie_gbps),))
    return snapshot(base=probes)
