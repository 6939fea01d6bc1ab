"""Read the engine's metrics history from the user's Prometheus (`triage diagnose --prometheus URL`).

For a window ending at `at` (default now) and the same window `against` earlier, every signal of
probes/history_queries.py is one instant query (histogram quantiles from bucket rates, counter rates,
gauge averages and maxima). From the current window this also builds the snapshot's `server_metrics`
payload, so the ordinary rules judge the history as they would a live window.

`query(expr, at_epoch_s)` is injectable: a function returning the first sample's value or None.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import httpx

from triage.core.errors import UsageError
from triage.core.probe_data import Histograms, HistogramWindow, PromHistoryData, ServerMetricsData
from triage.core.redact import redact_text
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.history_queries import ENGINE_MARKERS, ENGINE_QUERIES, GPU_QUERIES, render

Query = Callable[[str, float], "float | None"]


class PrometheusUnreachable(UsageError):
    """The Prometheus URL did not answer its query API."""


def http_query(url: str, timeout_s: float = 10.0) -> Query:
    """An instant-query function against Prometheus' HTTP API."""
    client = httpx.Client(base_url=url.rstrip("/"), timeout=timeout_s)

    def query(expr: str, at_epoch_s: float) -> float | None:
        try:
            response = client.get("/api/v1/query", params={"query": expr, "time": f"{at_epoch_s:.3f}"})
        except httpx.HTTPError as e:
            raise PrometheusUnreachable(f"--prometheus {redact_text(url)}: {type(e).__name__}: {e}") from None
        try:
            body = response.json()
        except ValueError:
            raise PrometheusUnreachable(f"--prometheus {redact_text(url)}: HTTP {response.status_code}, not "
                                        "Prometheus' query API") from None
        if body.get("status") != "success":
            raise UsageError(f"Prometheus rejected a query ({body.get('errorType')}: {body.get('error')}): {expr}")
        result = body.get("data", {}).get("result") or []
        if not result:
            return None
        value = float(result[0]["value"][1])
        return None if math.isnan(value) or math.isinf(value) else value

    return query


def detect_engine(query: Query, selector: str, window: str, at: float) -> str | None:
    for engine, markers in ENGINE_MARKERS:
        for marker in markers:
            if query(render(f"count(last_over_time({marker}{{sel}}[{{w}}]))", selector, window), at):
                return engine
    return None


def signals(query: Query, engine: str, selector: str, gpu_selector: str, window: str,
            at: float) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, template in ENGINE_QUERIES.get(engine, {}).items():
        out[name] = query(render(template, selector, window), at)
    for name, template in GPU_QUERIES.items():
        out[name] = query(render(template, gpu_selector, window), at)
    rps, prompt = out.get("requests_per_s"), out.get("prompt_tokens_per_s")
    out["prompt_tokens_per_request"] = prompt / rps if rps and prompt is not None else None
    return out


def server_metrics_from(now: dict[str, float | None], engine: str, window_s: float, url: str) -> ServerMetricsData:
    """The current window as the live probe's payload, so that the rules can read it."""
    def per_window(rate: float | None) -> float | None:
        return rate * window_s if rate is not None else None

    ttft = HistogramWindow(p50_s=now.get("ttft_p50_s"), p90_s=now.get("ttft_p90_s"), p99_s=now.get("ttft_p99_s")) \
        if now.get("ttft_p99_s") is not None else None
    queue = HistogramWindow(p99_s=now.get("queue_time_p99_s")) if now.get("queue_time_p99_s") is not None else None
    histograms = Histograms(ttft_s=ttft, queue_time_s=queue) if ttft or queue else None
    return ServerMetricsData(
        engine=engine, window_s=window_s, url=url,
        kv_cache_usage_frac=now.get("kv_cache_usage_mean"), kv_cache_usage_frac_max=now.get("kv_cache_usage_max"),
        num_requests_running=now.get("requests_running_mean"),
        num_requests_running_max=now.get("requests_running_max"),
        num_requests_waiting=now.get("requests_waiting_mean"),
        num_requests_waiting_max=now.get("requests_waiting_max"),
        preemptions_per_s=now.get("preemptions_per_s"), num_preemptions_delta=per_window(now.get("preemptions_per_s")),
        prompt_tokens_per_s=now.get("prompt_tokens_per_s"), generation_tokens_per_s=now.get("generation_tokens_per_s"),
        prompt_tokens_delta=per_window(now.get("prompt_tokens_per_s")),
        generation_tokens_delta=per_window(now.get("generation_tokens_per_s")),
        num_requests_finished_delta=per_window(now.get("requests_per_s")),
        histograms=histograms)


def probe_history(url: str, window_s: float, against_s: float, at_epoch_s: float | None = None,
                  selector: str = "", gpu_selector: str = "", query: Query | None = None) -> list[ProbeResult]:
    """(`prometheus_history`, `server_metrics`) probe results for the window ending at `at_epoch_s`."""
    started = time.perf_counter()
    q = query or http_query(url)
    at = at_epoch_s if at_epoch_s is not None else time.time()
    window = f"{int(window_s)}s"
    shown = redact_text(url)

    def result(name: str, status: ProbeStatus, reason: str | None, data: Any = None) -> ProbeResult:
        return ProbeResult(name, status, time.perf_counter() - started, reason, data)

    engine = detect_engine(q, selector, window, at)
    if engine is None:
        reason = (f"{shown} has no vLLM, SGLang, TGI or llama.cpp series" + (f" matching {selector}" if selector else "")
                  + f" in the {window} before {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(at))}")
        history = PromHistoryData(url=shown, selector=selector or None, window_s=window_s, against_s=against_s,
                                  at_epoch_s=at)
        return [result("prometheus_history", ProbeStatus.ERROR, reason, history),
                result("server_metrics", ProbeStatus.ERROR, reason)]
    now = signals(q, engine, selector, gpu_selector, window, at)
    then = signals(q, engine, selector, gpu_selector, window, at - against_s)
    missing = tuple(sorted(k for k in now if now[k] is None and then.get(k) is None))
    history = PromHistoryData(url=shown, engine=engine, selector=selector or None, window_s=window_s,
                              against_s=against_s, at_epoch_s=at, now=now, then=then, missing=missing)
    note = None if any(v is not None for v in then.values()) else \
        f"nothing in the comparison window ({against_s / 86400:g} days earlier): only the current window is judged"
    return [result("prometheus_history", ProbeStatus.OK, note, history),
            result("server_metrics", ProbeStatus.OK, f"from {shown}'s history (window {window})",
                   server_metrics_from(now, engine, window_s, shown))]
