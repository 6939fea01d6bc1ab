"""The deployment signals of a /metrics window (docs/TOPOLOGIES.md): per rank, the gauges at the end and the
queue's most, and the TTFT and queue-time histograms over the window; the KV transfer's per-transfer time and
bytes; the offload tier's hit rate and traffic; the experts' mean balance. Pure functions over two scrapes of
probes/prom_topology.py (and the ones between them)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from triage.core.probe_data import KvOffloadWindow, KvTransferWindow, RankWindow
from triage.probes.metrics_window import _counter_delta, _histogram_summary, histogram_delta
from triage.probes.prom_topology import OffloadScrape, TopologyScrape, TransferScrape


def _delta(before: float | None, after: float | None) -> float | None:
    """A counter's delta; absent at the start (a connector's first transfer) counts from zero, as a reset does."""
    return _counter_delta(0.0 if before is None else before, after)[0]


def _ranks(before: TopologyScrape | None, after: TopologyScrape, seen: Sequence[TopologyScrape | None]) -> tuple:
    window = [s for s in (before, *seen, after) if s is not None]
    out = []
    for rank, now in after.ranks.items():
        then = before.ranks.get(rank) if before else None
        mine = [s.ranks[rank] for s in window if rank in s.ranks]
        waits = [r.waiting for r in mine if r.waiting is not None]
        kvs = [r.kv_usage for r in mine if r.kv_usage is not None]
        out.append(RankWindow(
            rank=rank, num_requests_running=now.running, num_requests_waiting=now.waiting,
            num_requests_waiting_max=max(waits) if waits else None, kv_cache_usage_frac_max=max(kvs) if kvs else None,
            ttft=_histogram_summary(histogram_delta(then.ttft if then else None, now.ttft)),
            queue_time=_histogram_summary(histogram_delta(then.queue if then else None, now.queue))))
    return tuple(out)


def _transfer(before: TransferScrape | None, after: TransferScrape) -> KvTransferWindow:
    spec = after.spec
    unit = spec.time_unit_s
    if after.time is None:      # a gauge of the latest transfer's time: no count, no distribution
        return KvTransferWindow(connector=spec.connector, side=spec.side, metric=spec.time_hist,
                                time_mean_s=after.time_gauge * unit if after.time_gauge is not None else None,
                                failures_delta=_delta(before.failures if before else None, after.failures))
    time = histogram_delta(before.time if before else None, after.time)
    size = histogram_delta(before.size if before else None, after.size)
    summary = _histogram_summary(time)
    count = time.count if time else None
    moved = size.sum * spec.bytes_unit if size is not None and size.count > 0 else None
    spent = time.sum * unit if time is not None and time.count > 0 else None
    return KvTransferWindow(
        connector=spec.connector, side=spec.side, metric=spec.time_hist, num_transfers_delta=count,
        time_mean_s=summary.mean_s * unit if summary and summary.mean_s is not None else None,
        time_p90_s=summary.p90_s * unit if summary and summary.p90_s is not None else None,
        bytes_mean=moved / size.count if moved is not None and size is not None else None,
        gbytes_per_s=moved / spent / 1e9 if moved is not None and spent else None,
        failures_delta=_delta(before.failures if before else None, after.failures))


def _offload(before: OffloadScrape | None, after: OffloadScrape, window_s: float) -> KvOffloadWindow | None:
    def d(attr: str) -> float | None:
        return _delta(getattr(before, attr) if before else None, getattr(after, attr))

    queries, hits, moved, spent = d("queries"), d("hits"), d("bytes_total"), d("time_total_s")
    if not queries and not moved and after.used is None:
        return None          # the series exist (vLLM exports them with no connector) but nothing went through
    return KvOffloadWindow(
        tier=after.spec.tier, queries_delta=queries, hits_delta=hits,
        hit_rate=hits / queries if hits is not None and queries else None,
        bytes_delta=moved, transfer_s_delta=spent,
        gbytes_per_s=moved / window_s / 1e9 if moved is not None and window_s > 0 else None,
        used_frac=after.used / after.capacity if after.used is not None and after.capacity else None)


def topology_window(before: TopologyScrape | None, after: TopologyScrape | None,
                    seen: Sequence[TopologyScrape | None], window_s: float) -> dict[str, Any]:
    """The ServerMetricsData fields: ranks, role, kv_transfer, kv_offload, expert_balancedness."""
    if after is None:
        return {}
    balance = None
    count = _delta(before.balance_count if before else None, after.balance_count)
    total = _delta(before.balance_sum if before else None, after.balance_sum)
    if count and total is not None:
        balance = total / count
    elif after.balance_count:      # no new forward passes in the window: the mean since start
        balance = (after.balance_sum or 0.0) / after.balance_count
    return {
        "ranks": _ranks(before, after, seen),
        "role": after.role,
        "kv_transfer": _transfer(before.transfer if before else None, after.transfer) if after.transfer else None,
        "kv_offload": _offload(before.offload if before else None, after.offload, window_s) if after.offload else None,
        "expert_balancedness": balance,
    }
