"""The `server_peers` probe: the other instances of one deployment, named by giving `--url` again (a prefill
instance beside a decode one, or the replicas behind one router). Each peer's /metrics window is scraped over
the same window as the target's, in its own thread; its role is the URL's fragment when given
(`http://10.0.0.5:8000#prefill`: a fragment is never sent to the server) or what its metric labels name."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

from triage.core.probe_data import PeerWindow, ServerMetricsData, ServerPeersData
from triage.core.redact import redact_text
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.registry import ProbeRun, register
from triage.probes.server_metrics import probe_server_metrics

ROLES = ("prefill", "decode", "both")


def split_role(url: str) -> tuple[str, str | None]:
    """('http://h:8000', 'prefill') from 'http://h:8000#prefill'; a fragment that names no role is an error."""
    parts = urlsplit(url)
    if not parts.fragment:
        return url, None
    role = parts.fragment.strip().lower()
    if role not in ROLES:
        raise ValueError(f"--url {url}: the part after # names the instance's role, one of {', '.join(ROLES)}")
    return urlunsplit(parts._replace(fragment="")), role


def _peer(url: str, window_s: float) -> PeerWindow:
    base, role = split_role(url)
    result = probe_server_metrics(base, window_s)
    metrics = result.data if isinstance(result.data, ServerMetricsData) else None
    source = "--url #fragment" if role else None
    if role is None and metrics is not None and metrics.role:
        role, source = metrics.role, "metrics label"
    return PeerWindow(url=redact_text(base), role=role, role_source=source,
                      error=None if result.ok else result.reason, metrics=metrics)


def probe_server_peers(urls: tuple[str, ...], window_s: float) -> ProbeResult:
    start = time.perf_counter()
    if not urls:
        return ProbeResult("server_peers", ProbeStatus.UNSUPPORTED, 0.0,
                           "one --url: give --url again for the deployment's other instances")
    with ThreadPoolExecutor(max_workers=min(8, len(urls)), thread_name_prefix="triage-peer") as pool:
        peers = tuple(pool.map(lambda u: _peer(u, window_s), urls))
    status = ProbeStatus.OK if any(p.metrics is not None for p in peers) else ProbeStatus.ERROR
    reason = None if status is ProbeStatus.OK else "no peer answered with metrics: " + "; ".join(
        f"{p.url}: {p.error}" for p in peers)
    return ProbeResult("server_peers", status, time.perf_counter() - start, reason, ServerPeersData(peers=peers))


@register("server_peers", phase=2, order=62, timeout_s=lambda run: run.window_s + run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_server_peers(tuple(run.peer_urls), run.window_s)
