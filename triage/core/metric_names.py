"""The bench metric names that bench writes and compare judges, defined once."""
from __future__ import annotations

LATENCY_FAMILIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
LATENCY_STATS = ("mean", "p50", "p90", "p95", "p99", "max")
THROUGHPUT_METRICS = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "goodput_requests_per_s")


def repeat_key(metric: str) -> str:
    """The key of a metric in a level's `repeats` entries: ttft_ms.p99 -> ttft_ms_p99."""
    return metric.replace(".", "_")
