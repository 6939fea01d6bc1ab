"""Which bench metrics compare judges, which way is better, and how much worse is a regression."""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from triage.core.errors import UsageError
from triage.core.metric_names import LATENCY_FAMILIES, LATENCY_STATS, THROUGHPUT_METRICS, repeat_key  # noqa: F401

DEFAULT_LATENCY_PCT = 10.0     # the default gate: latencies may get 10% worse before it trips
DEFAULT_THROUGHPUT_PCT = 5.0   # the default gate: throughputs may drop 5%

# What `compare` judges when --max-regression names nothing else.
DEFAULT_METRICS = (
    "ttft_ms.p50", "ttft_ms.p99", "tpot_ms.p50", "tpot_ms.p99", "itl_ms.p99", "e2e_ms.p99",
    "output_tokens_per_s", "requests_per_s", "goodput_requests_per_s",
)


class Direction(str, enum.Enum):
    LOWER_IS_BETTER = "lower_is_better"
    HIGHER_IS_BETTER = "higher_is_better"


@dataclass(frozen=True, slots=True)
class MetricRule:
    metric: str          # "ttft_ms.p99" or "output_tokens_per_s"
    direction: Direction
    max_regression_pct: float


def is_known(metric: str) -> bool:
    family, _, stat = metric.partition(".")
    return (family in LATENCY_FAMILIES and stat in LATENCY_STATS) or (metric in THROUGHPUT_METRICS and not stat)


def default_rule(metric: str) -> MetricRule:
    if metric in THROUGHPUT_METRICS:
        return MetricRule(metric, Direction.HIGHER_IS_BETTER, DEFAULT_THROUGHPUT_PCT)
    return MetricRule(metric, Direction.LOWER_IS_BETTER, DEFAULT_LATENCY_PCT)


_PCT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%?\s*$")


def parse_max_regression(spec: str | None) -> tuple[MetricRule, ...]:
    """`ttft_ms.p99=10%,output_tokens_per_s=5%` → rules; metrics not named keep their defaults."""
    overrides: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in (spec or "").split(","))):
        metric, eq, value = item.partition("=")
        metric = metric.strip()
        if not eq or not _PCT.match(value):
            raise UsageError(f"--max-regression: {item!r} is not METRIC=PCT (e.g. ttft_ms.p99=10%)")
        if not is_known(metric):
            known = ", ".join(f"{f}.{{{'|'.join(LATENCY_STATS)}}}" for f in LATENCY_FAMILIES)
            raise UsageError(f"--max-regression: unknown metric {metric!r}; use one of {known}, "
                             f"{', '.join(THROUGHPUT_METRICS)}")
        overrides[metric] = float(_PCT.match(value).group(1))
    names = list(DEFAULT_METRICS) + [m for m in overrides if m not in DEFAULT_METRICS]
    rules = []
    for name in names:
        rule = default_rule(name)
        if name in overrides:
            rule = MetricRule(name, rule.direction, overrides[name])
        rules.append(rule)
    return tuple(rules)
