"""Which server a bench measured, asked the way `triage diagnose` asks it: the engine_identity and server_config
probes on the URL and one /metrics scrape, once the load is over. So bench, diagnose and the HTML report name a
server alike (the reference engine is `reference`, not `vllm` for its vLLM-named metrics; an unidentified one
by what it says of itself), and the bench's rules see the server's settings: a KV cache pinned by hand, its
memory share."""
from __future__ import annotations

from dataclasses import dataclass

from triage.core.probe_data import EngineIdentityData, ServerConfigData
from triage.core.snapshot import Snapshot
from triage.engines import GENERIC


@dataclass(frozen=True, slots=True)
class Identity:
    engine: str
    version: str | None
    says: str | None          # an unidentified server: what it says of itself


def server_snapshot(url: str) -> Snapshot:
    """The passive server probes on `url` (each bounded; a server that is gone gives unsupported probes)."""
    from triage.probes.engine_identity import probe_engine_identity
    from triage.probes.server_config import probe_server_config
    from triage.probes.server_metrics import probe_server_metrics

    ident = probe_engine_identity(url)
    engine = ident.data.engine if isinstance(ident.data, EngineIdentityData) else None
    return Snapshot(probes=(ident, probe_server_config(url, engine=engine), probe_server_metrics(url, window_s=0)))


def identity(snapshot: Snapshot, metrics_engine: str | None, version: str | None) -> Identity:
    """The engine the probes name; else the one the bench's metric names imply; else generic."""
    ident = snapshot.payload(EngineIdentityData) or EngineIdentityData()
    cfg = snapshot.payload(ServerConfigData) or ServerConfigData()
    engine = ident.engine or cfg.engine or metrics_engine or GENERIC
    return Identity(engine, ident.version or cfg.engine_version or version,
                    ident.says if engine == GENERIC else None)
