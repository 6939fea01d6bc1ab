"""SCHED003 (queueing-dominates-ttft): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/SCHED003/."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from triage.core.probe_data import Histograms, HistogramWindow, ServerMetricsData
from triage.core.report import BenchLevel, Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.fmt import pct
from triage.rules.registry import rule
from triage.rules.scaling import flat_scaling


@rule("SCHED003", "queueing-dominates-ttft", Severity.HIGH, ("bench|server_metrics",), RuleDoc(
    what="Server queue time is >= 50% of TTFT (and at least 50 ms, so that users can feel it), or between two "
         "bench levels client TTFT grows at least 3/4 as fast as concurrency while TPOT stays flat (<= 1.25x): "
         "requests wait for a slot, not for compute.",
    why="Queueing adds to TTFT before any work starts; it means demand exceeds the capacity this server "
        "admits (a KV or sequence cap, or simply too few replicas) ('Why Your LLM Inference Is Slow: vLLM, KV Cache, and GPU Fit', an explainer of inference as a memory-bound problem, 'serving the model').",
    example="bench.c32.server.server_queue_time_ms_mean = 820, bench.c32.server.server_ttft_ms_mean = 1010",
    fix="Add capacity (replicas, or free the cap that KV001/SCHED002 name), route with least-pending-requests "
        "load balancing, and rate-limit at the gateway.",
    references=("'Why Your LLM Inference Is Slow: vLLM, KV Cache, and GPU Fit' (2026-06-15): watch queue depth: slow inference may be queueing",
                "an explainer of inference as a memory-bound problem, 'serving the model' (scaling out: least-pending-requests routing)", "claim:tgi.request-queue-duration",
                "claim:tgi.request-duration", "claim:vllm.queue-time-histogram", "claim:vllm.ttft-histogram",
                "claim:sglang.queue-time-histogram", "claim:sglang.ttft-histogram"),
), thresholds=("SCHED003.queue_share_frac", "SCHED003.min_queue_ms", "SCHED003.max_tpot_growth",
               "SCHED003.min_ttft_growth_frac_of_linear"))
def sched003(ctx: Context) -> Hit | None:
    found = _Queueing()
    if ctx.bench is not None:
        _level_queue_share(ctx, found)
        _ttft_sweep(ctx, found)
    _histogram_queue_share(ctx, found)
    if not found.seen:
        raise MissingInput("neither server queue time nor a concurrency sweep of TTFT was measured")
    if not found.evidence:
        return None
    message = (f"Requests spend {pct(found.worst)} of their TTFT waiting in the server's queue." if found.worst else
               "TTFT grows in step with concurrency while TPOT stays flat: requests wait for a slot, not compute.")
    fix = Fix("Add capacity: free the cap named by KV001/SCHED002 if they fire, otherwise add replicas behind "
              "a least-pending-requests load balancer (not round-robin), and rate-limit at the gateway.", ())
    if flat_scaling(ctx) is not None:
        # Replicas of a server that runs one request at a time multiply the waste: batching comes first.
        fix = Fix("First make the server batch (ENG001: its throughput does not grow with concurrency, so "
                  "requests queue for one slot); only if requests still queue after that, add replicas behind a "
                  "least-pending-requests load balancer.", ())
    return Hit(
        title="Queueing dominates time to first token",
        message=message, evidence=found.evidence, certainty=Certainty.LIKELY, impact=0.7, fix=fix,
    )


@dataclass(slots=True)
class _Queueing:
    """What SCHED003 gathers: whether queue time or a concurrency sweep was measured, the evidence that
    requests queue, and the largest share of TTFT spent in the queue."""
    seen: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)
    worst: float = 0.0


def _level_queue_share(ctx: Context, found: _Queueing) -> None:
    """Each bench level's server queue time against its TTFT."""
    share_min, min_queue = ctx.th("SCHED003.queue_share_frac"), ctx.th("SCHED003.min_queue_ms")
    for lv, s in ctx.level_server():
        queue, server_ttft = s.server_queue_time_ms_mean, s.server_ttft_ms_mean
        # TGI exports queue time but no TTFT histogram (claim tgi.request-queue-duration): the client's TTFT,
        # which includes the server's, is then the denominator (a smaller share, never a larger one).
        if queue is None or not (server_ttft or lv.ttft_ms.mean):
            continue
        found.seen = True
        # Share of the TTFT the user sees (client TTFT includes the HTTP path) when it is larger.
        ttft = max(server_ttft or 0.0, lv.ttft_ms.mean or 0.0)
        if queue >= min_queue and queue / ttft >= share_min:
            _queued_level(lv, queue, server_ttft, ttft, found)


def _queued_level(lv: BenchLevel, queue: float, server_ttft: float | None, ttft: float, found: _Queueing) -> None:
    p = level_label(lv)
    found.evidence[f"{p}.server.server_queue_time_ms_mean"] = queue
    if server_ttft:
        found.evidence[f"{p}.server.server_ttft_ms_mean"] = server_ttft
    if ttft > (server_ttft or 0.0):
        found.evidence[f"{p}.ttft_ms.mean"] = lv.ttft_ms.mean
    found.worst = max(found.worst, queue / ttft)


def _ttft_sweep(ctx: Context, found: _Queueing) -> None:
    """Pairs of bench levels (concurrency at least doubled) whose TTFT grows nearly as fast as concurrency while
    TPOT stays flat."""
    levels = sorted((lv for lv in ctx.levels() if lv.concurrency and lv.ttft_ms.p50 and lv.tpot_ms.p50),
                    key=lambda lv: lv.concurrency)
    for lo, hi in zip(levels, levels[1:], strict=False):
        if hi.concurrency < 2 * lo.concurrency:
            continue
        found.seen = True
        c_ratio = hi.concurrency / lo.concurrency
        ttft_ratio, tpot_ratio = hi.ttft_ms.p50 / lo.ttft_ms.p50, hi.tpot_ms.p50 / lo.tpot_ms.p50
        if ttft_ratio >= ctx.th("SCHED003.min_ttft_growth_frac_of_linear") * c_ratio and \
                tpot_ratio <= ctx.th("SCHED003.max_tpot_growth"):
            found.evidence[f"{level_label(lo)}.ttft_ms.p50"] = lo.ttft_ms.p50
            found.evidence[f"{level_label(hi)}.ttft_ms.p50"] = hi.ttft_ms.p50
            found.evidence[f"{level_label(lo)}.tpot_ms.p50"] = lo.tpot_ms.p50
            found.evidence[f"{level_label(hi)}.tpot_ms.p50"] = hi.tpot_ms.p50
            found.evidence["derived.ttft_growth_x"] = round(ttft_ratio, 2)
            found.evidence["derived.concurrency_growth_x"] = round(c_ratio, 2)


def _histogram_queue_share(ctx: Context, found: _Queueing) -> None:
    """The server's queue-time histogram against its TTFT histogram (or, without one, its request duration)."""
    share_min, min_queue = ctx.th("SCHED003.queue_share_frac"), ctx.th("SCHED003.min_queue_ms")
    hist = ctx.seen(ServerMetricsData).histograms or Histograms()
    queue_h, ttft_h = hist.queue_time_s or HistogramWindow(), hist.ttft_s or HistogramWindow()
    # Without a TTFT histogram (TGI) the request's whole duration bounds TTFT from above: queue / e2e is a
    # share of TTFT no larger than the true one.
    bound_key, bound_h = ("ttft_s", ttft_h) if ttft_h.mean_s else ("e2e_s", hist.e2e_s or HistogramWindow())
    if queue_h.mean_s is None or not bound_h.mean_s:
        return
    found.seen = True
    if queue_h.mean_s * 1000 >= min_queue and queue_h.mean_s / bound_h.mean_s >= share_min:
        found.evidence["server_metrics.histograms.queue_time_s.mean_s"] = queue_h.mean_s
        found.evidence[f"server_metrics.histograms.{bound_key}.mean_s"] = bound_h.mean_s
        found.worst = max(found.worst, queue_h.mean_s / bound_h.mean_s)
