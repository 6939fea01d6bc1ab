"""NET003 (high-client-rtt): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/NET003/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import (
    Histograms,
    HistogramWindow,
    NetworkData,
    ServerMetricsData,
)
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.fmt import ms
from triage.rules.registry import rule


@rule("NET003", "high-client-rtt", Severity.MEDIUM, ("network",), RuleDoc(
    what="TCP connect or /health time-to-first-byte is >= 2 ms from the same host or zone, or is >= 20% of "
         "the TTFT. A slow connect is the network; a fast connect with a slow /health answer is the server's "
         "HTTP front end, reported at low severity as such.",
    why="Each streamed response pays the round trip several times (connect, TLS, first byte); a distant or "
        "congested path adds it straight onto TTFT (the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM): 2 ms across zones became 8 ms per response).",
    example="network.same_host = true, network.tcp_connect_ms_p50 = 3.4, network.health_ttfb_ms_p50 = 6.1",
    fix="Co-locate client and server (same zone), keep connections alive, and avoid proxies on the hot path.",
    references=("a team's account of taking a Llama 2 70B code-completion service from 214 ms to 47 ms median TTFT with vLLM, 'Lessons Learned and Common Pitfalls' (network overhead is real)", "'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'Network Layer' (curl time_connect/ttfb)"),
), thresholds=("NET003.same_host_ms", "NET003.ttft_share_frac"))
def net003(ctx: Context) -> Hit | None:
    data = ctx.need(NetworkData)
    connect, ttfb = data.tcp_connect_ms_p50, data.health_ttfb_ms_p50
    if connect is None and ttfb is None:
        raise MissingInput("network.tcp_connect_ms_p50 and network.health_ttfb_ms_p50 were not measured")
    evidence: dict[str, Any] = {"network.url": data.url, "network.same_host": data.same_host,
                                "network.tcp_connect_ms_p50": connect, "network.health_ttfb_ms_p50": ttfb}
    ttft = _ttft_ms(ctx, evidence)
    if not data.same_host and ttft is None:
        raise MissingInput("the server is remote and no TTFT was measured to compare the round trip with")
    slow_connect, slow_ttfb = _too_slow(ctx, data, ttft, connect), _too_slow(ctx, data, ttft, ttfb)
    if slow_connect:
        return Hit(
            title="The network round trip to the server is slow",
            message=f"Opening a TCP connection to the server takes {' and '.join(slow_connect)}.",
            evidence=evidence, certainty=Certainty.LIKELY, impact=0.2,
            fix=Fix("Run the client in the same host or zone as the server, reuse connections (HTTP keep-alive), "
                    "and take proxies off the hot path; measure with the command below.", (_curl(data),)),
        )
    if slow_ttfb:
        # The connection is fast, so the time is spent inside the server before it answers.
        return Hit(
            title="The server is slow to answer even a health check",
            message=f"The connection opens in {ms(connect) if connect is not None else 'n/a'}, but /health answers "
                    f"after {' and '.join(slow_ttfb)}: the server's HTTP front end is slow to respond (a busy event "
                    "loop or a starved CPU), not the network.",
            evidence=evidence, severity=Severity.LOW, certainty=Certainty.POSSIBLE, impact=0.15,
            fix=Fix("Give the API server CPU headroom (see CPU003) and keep blocking work off its event loop; "
                    "compare with the command below while the server is idle.", (_curl(data),)),
        )
    return None


def _ttft_ms(ctx: Context, evidence: dict[str, Any]) -> float | None:
    """The TTFT p50 to weigh the round trip against: the bench's lowest concurrency level, else the server's
    TTFT histogram; added to `evidence`."""
    if ctx.bench is not None:
        lows = [lv for lv in ctx.bench.levels if lv.client.valid and lv.ttft_ms.p50 is not None]
        if lows:
            lv = min(lows, key=lambda x: x.concurrency or 0)
            evidence[f"{level_label(lv)}.ttft_ms.p50"] = lv.ttft_ms.p50
            return lv.ttft_ms.p50
    hist = (ctx.seen(ServerMetricsData).histograms or Histograms()).ttft_s or HistogramWindow()
    if hist.p50_s is not None:
        evidence["server_metrics.histograms.ttft_s.p50_s"] = hist.p50_s
        return hist.p50_s * 1000
    return None


def _too_slow(ctx: Context, data: NetworkData, ttft: float | None, value: float | None) -> list[str]:
    """Why a round trip of `value` ms is too slow, in words; [] when it is not."""
    if value is None:
        return []
    out = []
    if data.same_host and value >= ctx.th("NET003.same_host_ms"):
        out.append(f"{ms(value)} on the same host, where loopback takes well under a millisecond")
    if ttft and value / ttft >= ctx.th("NET003.ttft_share_frac"):
        out.append(f"{value / ttft:.0%} of the TTFT")
    return out


def _curl(data: NetworkData) -> str:
    url = (data.url or "http://HOST:8000").rstrip("/")
    return f"curl -s -o /dev/null -w 'tcp=%{{time_connect}}s ttfb=%{{time_starttransfer}}s\\n' {url}/health"
