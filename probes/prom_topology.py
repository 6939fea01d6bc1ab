"""One scrape's deployment signals, through the engine's TopologyMap (triage/engines/topology_map.py): the
per-rank gauges and histograms (kept apart by the rank label instead of summed), the disaggregation role the
labels name, the KV connector's transfer histograms and the offload tier's counters. The window over two
scrapes is probes/topology_window.py. Pure: a parsed scrape in, plain dataclasses out."""
from __future__ import annotations

from dataclasses import dataclass, field

from triage.engines.topology_map import Offload, TopologyMap, Transfer
from triage.probes.prom import Histogram, MetricsSample, _histogram, _max, _sum


@dataclass(frozen=True, slots=True)
class RankScrape:
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    ttft: Histogram | None = None
    queue: Histogram | None = None


@dataclass(frozen=True, slots=True)
class TransferScrape:
    spec: Transfer
    time: Histogram | None = None          # in the metric's own unit
    time_gauge: float | None = None        # the same name exported as a gauge (SGLang up to 0.5.9)
    size: Histogram | None = None
    failures: float | None = None


@dataclass(frozen=True, slots=True)
class OffloadScrape:
    spec: Offload
    hits: float | None = None
    queries: float | None = None
    bytes_total: float | None = None
    time_total_s: float | None = None
    used: float | None = None
    capacity: float | None = None


@dataclass(frozen=True, slots=True)
class TopologyScrape:
    ranks: dict[str, RankScrape] = field(default_factory=dict)
    role: str | None = None
    transfer: TransferScrape | None = None
    offload: OffloadScrape | None = None
    balance_sum: float | None = None       # the expert-balance summary's _sum and _count
    balance_count: float | None = None


def _one(name: str | None) -> tuple[str, ...]:
    return (name,) if name else ()


def _rank(sample: MetricsSample, m: TopologyMap, value: str) -> RankScrape:
    label = {m.rank_label: value} if m.rank_label else {}
    kv = next((found for name in m.kv_usage if (found := [s.value for s in sample.series(name, **label)])), [])
    return RankScrape(
        running=_sum(sample, _one(m.running), **label), waiting=_sum(sample, _one(m.waiting), **label),
        kv_usage=max(kv) if kv else None,
        ttft=_histogram(sample, _one(m.ttft_hist), **label), queue=_histogram(sample, _one(m.queue_hist), **label))


def _ranks(sample: MetricsSample, m: TopologyMap) -> dict[str, RankScrape]:
    """Each rank label value seen on the running or waiting gauge; none unless there are at least two."""
    if not m.rank_label:
        return {}
    values = {s.labels[m.rank_label] for n in (m.running, m.waiting) if n for s in sample.series(n)
              if s.labels.get(m.rank_label) not in (None, "")}
    if len(values) < 2:
        return {}
    return {v: _rank(sample, m, v) for v in sorted(values, key=lambda x: (len(x), x))}


def _role(sample: MetricsSample, m: TopologyMap) -> str | None:
    if not m.role_label or not m.running:
        return None
    seen = {m.role_values.get(s.labels.get(m.role_label, "")) for s in sample.series(m.running)}
    seen.discard(None)
    return seen.pop() if len(seen) == 1 else None


def _transfer(sample: MetricsSample, m: TopologyMap) -> TransferScrape | None:
    for t in m.transfers:
        time = _histogram(sample, [t.time_hist])
        gauge = None if time is not None else _max(sample, [t.time_hist])
        if time is None and gauge is None:
            continue
        return TransferScrape(t, time=time, time_gauge=gauge,
                              size=_histogram(sample, _one(t.bytes_hist)), failures=_sum(sample, t.failures))
    return None


def _offload(sample: MetricsSample, m: TopologyMap) -> OffloadScrape | None:
    for o in m.offloads:
        got = OffloadScrape(o, hits=_sum(sample, _one(o.hits)), queries=_sum(sample, _one(o.queries)),
                            bytes_total=_sum(sample, _one(o.bytes_total)),
                            time_total_s=_sum(sample, _one(o.time_total_s)),
                            used=_sum(sample, _one(o.used)), capacity=_sum(sample, _one(o.capacity)))
        if any(v is not None for v in (got.queries, got.bytes_total, got.used)):
            return got
    return None


def read_topology(sample: MetricsSample, m: TopologyMap | None) -> TopologyScrape | None:
    if m is None:
        return None
    base = m.expert_balance
    return TopologyScrape(
        ranks=_ranks(sample, m), role=_role(sample, m), transfer=_transfer(sample, m), offload=_offload(sample, m),
        balance_sum=_sum(sample, [base + "_sum"]) if base else None,
        balance_count=_sum(sample, [base + "_count"]) if base else None)
