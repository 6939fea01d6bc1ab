"""Serve the latest watch cycle with prometheus-client: one Collector that yields what signals.py made
of the last cycle, plus the cycle's own health (when it ran, how long it took, how many failed)."""
from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from triage.core.errors import UsageError
from triage.watch.signals import Family


class WatchCollector(Collector):
    """Holds the last cycle's families; a scrape reads them under a lock, never mid-update."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: list[Family] = []
        self._last_run_s: float | None = None
        self._last_duration_s: float | None = None
        self._runs = 0
        self._failures = 0

    def update(self, families: list[Family], finished_at_s: float, duration_s: float) -> None:
        with self._lock:
            self._families = list(families)
            self._last_run_s, self._last_duration_s = finished_at_s, duration_s
            self._runs += 1

    def failed(self) -> None:
        with self._lock:
            self._failures += 1

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        with self._lock:
            families = list(self._families)
            last, duration, runs, failures = self._last_run_s, self._last_duration_s, self._runs, self._failures
        for fam in families:
            gauge = GaugeMetricFamily(fam.name, fam.help, labels=list(fam.labels))
            for labels, value in fam.samples:
                gauge.add_metric(list(labels), value)
            yield gauge
        yield CounterMetricFamily("triage_watch_cycles", "Watch cycles completed", value=runs)
        yield CounterMetricFamily("triage_watch_cycle_failures", "Watch cycles that failed", value=failures)
        if last is not None:
            yield GaugeMetricFamily("triage_watch_last_cycle_timestamp_seconds",
                                    "When the last cycle finished (Unix time)", value=last)
            yield GaugeMetricFamily("triage_watch_last_cycle_duration_seconds",
                                    "How long the last cycle took", value=duration)


def serve(collector: WatchCollector, host: str, port: int) -> tuple[object, int]:
    """Start the /metrics HTTP server in a daemon thread: (server, the port it bound)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        raise UsageError(f"--metrics-port {port} on {host}: {e.strerror or e}") from None
    return server, server.server_port
