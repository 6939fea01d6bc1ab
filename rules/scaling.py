"""Does throughput grow with concurrency? The non-batching verdict from the load alone.

A batching engine serving decode-bound requests turns N times the concurrency into close to N times
the output tokens/s, until the GPU saturates (batch 1 against batch 128: the roofline explainers, and "Why Your LLM Inference Is Slow (And How to Fix It)" on batching). An
engine that runs one request at a time (no batching, or one slot) keeps the same tokens/s however
many requests wait: its throughput stays flat while TTFT grows with the queue.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from triage.core.report import BenchLevel
from triage.rules.context import Context

MIN_CONCURRENCY_RATIO = 4.0   # compare c with at least 4x c (the "c=1 and any c >= 4")


@dataclass(frozen=True, slots=True)
class Scaling:
    low: BenchLevel
    high: BenchLevel
    throughput_x: float        # output tokens/s at `high` over `low`
    concurrency_x: float       # the ideal: concurrency at `high` over `low`

    @property
    def efficiency(self) -> float:
        """Share of the ideal (linear) scaling that was reached: 1.0 = linear, ~1/concurrency_x = flat."""
        return self.throughput_x / self.concurrency_x


def throughput_scaling(levels: Sequence[BenchLevel]) -> Scaling | None:
    """The lowest valid closed-loop level against the best-throughput level among those with >= 4x its
    concurrency (so a server that batches but saturates, or thrashes its KV cache at the top level, is not
    mistaken for one that does not batch), or None when the bench has no such pair (open-loop levels and
    levels without throughput do not count)."""
    usable = sorted((lv for lv in levels if lv.concurrency and lv.output_tokens_per_s
                     and lv.output_tokens_per_s > 0 and lv.client.valid
                     and lv.requests.completed > 0), key=lambda lv: lv.concurrency or 0)
    if not usable:
        return None
    low = usable[0]
    high = [lv for lv in usable if (lv.concurrency or 0) >= MIN_CONCURRENCY_RATIO * (low.concurrency or 1)]
    if not high:
        return None
    top = max(high, key=lambda lv: (lv.output_tokens_per_s, -(lv.concurrency or 0)))
    return Scaling(low, top, top.output_tokens_per_s / low.output_tokens_per_s,
                   (top.concurrency or 1) / (low.concurrency or 1))


def flat_scaling(ctx: Context) -> Scaling | None:
    """The bench's scaling when it is below ENG001's threshold (the server does not batch), else None."""
    if ctx.bench is None or not ctx.bench.levels:
        return None
    s = throughput_scaling(ctx.bench.levels)
    return s if s is not None and s.throughput_x < ctx.th("ENG001.min_throughput_gain_x") else None
