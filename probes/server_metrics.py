"""The `server_metrics` probe: scrape `/metrics` at the start and the end of the window (and a few
times in between for the maxima), normalise with probes/prom.py, and report the window's deltas.
Keys: docs/SNAPSHOT.md, section `server_metrics`.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable

from triage.core.probe_data import ServerMetricsData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.http import HttpFailure, HttpGet, base_url, http_get
from triage.probes.metrics_window import window_delta
from triage.probes.prom import EngineMetrics, normalise, parse_metrics
from triage.probes.registry import ProbeRun, register


class _NoMetrics(Exception):
    pass


def _scrape(get: HttpGet, url: str, timeout_s: float) -> tuple[EngineMetrics, int]:
    resp = get(url, timeout_s)
    if resp.status_code == 404:
        raise _NoMetrics(f"{url} answered 404: this server exposes no Prometheus metrics "
                         "(SGLang needs --enable-metrics; vLLM and TGI serve /metrics by default)")
    if resp.status_code >= 400:
        raise HttpFailure(f"{url} answered HTTP {resp.status_code}")
    sample = parse_metrics(resp.text)
    return normalise(sample), sample.num_bad_lines


def probe_server_metrics(url: str | None, window_s: float = 2.0, num_intermediate: int = 3,
                         timeout_s: float = 3.0, get: HttpGet = http_get,
                         sleep: Callable[[float], None] = time.sleep) -> ProbeResult:
    start = time.perf_counter()

    def done(status: ProbeStatus, reason: str | None, data: dict | None = None) -> ProbeResult:
        return ProbeResult("server_metrics", status, time.perf_counter() - start, reason, ServerMetricsData.of(data))

    if not url:
        return done(ProbeStatus.UNSUPPORTED, "no endpoint: pass --url, or run a server on this host")
    metrics_url = base_url(url) + "/metrics"
    try:
        before, bad = _scrape(get, metrics_url, timeout_s)
        if before.engine is None:
            return done(ProbeStatus.UNSUPPORTED, f"{metrics_url} has no vLLM, SGLang or TGI metric names")
        t0 = time.perf_counter()
        seen = []
        num_missed = 0
        steps = num_intermediate + 1 if window_s > 0 else 1
        for i in range(steps):
            sleep(window_s / steps)
            if i < steps - 1:
                try:   # an in-between scrape only refines the maxima: losing one loses nothing else
                    metrics, more_bad = _scrape(get, metrics_url, timeout_s)
                except HttpFailure:
                    num_missed += 1
                    continue
                seen.append(metrics)
                bad += more_bad
        after, more_bad = _scrape(get, metrics_url, timeout_s)
        bad += more_bad
        measured = time.perf_counter() - t0
    except _NoMetrics as e:
        return done(ProbeStatus.UNSUPPORTED, str(e))
    except HttpFailure as e:
        return done(ProbeStatus.ERROR, f"cannot scrape the metrics: {e}")
    # The measured span is the honest denominator; with an injected sleep it is ~0, so keep the nominal.
    actual_window_s = measured if measured >= window_s * 0.5 and math.isfinite(measured) else window_s
    data = window_delta(before, after, round(actual_window_s, 3), seen=seen, url=metrics_url, num_bad_lines=bad,
                        num_missed_scrapes=num_missed)
    return ProbeResult("server_metrics", ProbeStatus.OK, time.perf_counter() - start, None, data)


@register("server_metrics", phase=2, order=60, timeout_s=lambda run: run.window_s + run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_server_metrics(run.url, run.window_s)
