"""The `network` probe: DNS time, TCP connect time and /health time-to-first-byte to the endpoint,
each the median of a few samples, each sample on a fresh connection (as `curl -w` measures).
Keys: docs/SNAPSHOT.md, section `network`.
"""
from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from triage.core.probe_data import NetworkData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.discovery import is_local_host
from triage.probes.http import base_url
from triage.probes.registry import ProbeRun, register

Resolver = Callable[..., list]


def _median_ms(values: list[float]) -> float | None:
    return round(statistics.median(values) * 1000.0, 3) if values else None


def _ttfb(host: str, port: int, address: tuple, path: str, timeout_s: float) -> tuple[float, int | None]:
    """Seconds from connect to the first response byte of a plain HTTP/1.1 GET, and the status code."""
    t0 = time.perf_counter()
    with socket.create_connection(address[:2], timeout=timeout_s) as sock:
        request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\nUser-Agent: triage\r\n\r\n"
        sock.sendall(request.encode())
        first = sock.recv(64)
        elapsed = time.perf_counter() - t0
    status = None
    parts = first.split(b" ", 2)
    if len(parts) >= 2 and parts[1].isdigit():
        status = int(parts[1])
    return elapsed, status


@dataclass
class _Timings:
    dns: list[float] = field(default_factory=list)
    tcp: list[float] = field(default_factory=list)
    ttfb: list[float] = field(default_factory=list)
    statuses: list[int | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _sample(t: _Timings, host: str, port: int, scheme: str, path: str, resolver: Resolver, timeout_s: float) -> bool:
    """Time one DNS lookup, TCP connect and (over http) GET /health; False when the lookup or connect failed."""
    try:
        t0 = time.perf_counter()
        infos = resolver(host, port, type=socket.SOCK_STREAM)
        t.dns.append(time.perf_counter() - t0)
        address = infos[0][4]
    except OSError as e:
        t.errors.append(f"DNS: {e}")
        return False
    try:
        t0 = time.perf_counter()
        with socket.create_connection(address[:2], timeout=timeout_s):
            t.tcp.append(time.perf_counter() - t0)
    except OSError as e:
        t.errors.append(f"TCP connect to {address[0]}:{port}: {e}")
        return False
    if scheme == "http":  # over https only DNS and TCP are timed (no TLS handshake here)
        try:
            elapsed, status = _ttfb(host, port, address, path + "/health", timeout_s)
            t.ttfb.append(elapsed)
            t.statuses.append(status)
        except OSError as e:
            t.errors.append(f"GET /health: {e}")
    return True


def probe_network(url: str | None, num_samples: int = 5, timeout_s: float = 2.0,
                  resolver: Resolver = socket.getaddrinfo) -> ProbeResult:
    start = time.perf_counter()

    def done(status: ProbeStatus, reason: str | None, data: dict | None = None) -> ProbeResult:
        return ProbeResult("network", status, time.perf_counter() - start, reason, NetworkData.of(data))

    if not url:
        return done(ProbeStatus.UNSUPPORTED, "no endpoint: pass --url, or run a server on this host")
    parts = urlsplit(base_url(url))
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return done(ProbeStatus.ERROR, f"{url}: the port is not a number")
    if not host:
        return done(ProbeStatus.ERROR, f"{url}: no host in the URL")
    t = _Timings()
    for _ in range(num_samples):
        if not _sample(t, host, port, parts.scheme, parts.path, resolver, timeout_s):
            break
    dns, tcp, ttfb, statuses, errors = t.dns, t.tcp, t.ttfb, t.statuses, t.errors
    data = {
        "url": base_url(url),
        "host": host,
        "port": port,
        "same_host": is_local_host(host),
        "num_samples": len(tcp),
        "dns_ms_p50": _median_ms(dns),
        "tcp_connect_ms_p50": _median_ms(tcp),
        "health_ttfb_ms_p50": _median_ms(ttfb),
        "health_status_code": statuses[-1] if statuses else None,
        "errors": errors[:3],
    }
    if not tcp:
        return done(ProbeStatus.ERROR, "; ".join(errors) or f"cannot reach {url}", data)
    return done(ProbeStatus.OK, None, data)


@register("network", phase=0, order=70, timeout_s=lambda run: run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_network(run.url)
