"""A /metrics window: two normalised scrapes (probes/prom.py) and the ones between them become the
`server_metrics` payload (`ServerMetricsData`): gauges at the end and their maxima, counter deltas and
rates (a counter that went down is a restart: counted from zero and named in `counter_resets`), and
histogram deltas with interpolated quantiles. Pure functions, shared by `triage diagnose` and `triage bench`.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from triage.core.probe_data import Histograms, HistogramWindow, ServerMetricsData
from triage.probes.prom import EngineMetrics, Histogram


def _counter_delta(before: float | None, after: float | None) -> tuple[float | None, bool]:
    """(delta, reset). A counter that went down was reset (server restart): count from zero."""
    if before is None or after is None:
        return None, False
    if after < before:
        return after, True
    return after - before, False


def histogram_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """Prometheus-style quantile from cumulative buckets, linear within the bucket it falls in.

    The first bucket's lower bound is 0 (latencies are non-negative). A rank in the `+Inf` bucket
    returns the largest finite bound: the histogram cannot say more than "above that".
    """
    if not buckets:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return prev_le
            in_bucket = count - prev_count
            if in_bucket <= 0:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / in_bucket
        prev_le, prev_count = le, count
    return prev_le


def histogram_delta(before: Histogram | None, after: Histogram | None) -> Histogram | None:
    if after is None:
        return None
    if before is None:
        return after
    old = dict(before.buckets)
    buckets = tuple((le, c - old.get(le, 0.0)) for le, c in after.buckets)
    count = after.count - before.count
    if count < 0 or any(c < 0 for _, c in buckets):  # reset between scrapes
        return after
    return Histogram(buckets=buckets, count=count, sum=after.sum - before.sum)


def _histogram_summary(h: Histogram | None) -> HistogramWindow | None:
    if h is None:
        return None
    has_buckets = bool(h.buckets)
    return HistogramWindow(
        count_delta=h.count,
        sum_delta_s=h.sum,
        mean_s=h.sum / h.count if h.count > 0 else None,
        p50_s=histogram_quantile(h.buckets, 0.50) if has_buckets else None,
        p90_s=histogram_quantile(h.buckets, 0.90) if has_buckets else None,
        p99_s=histogram_quantile(h.buckets, 0.99) if has_buckets else None,
    )


def _rate(delta: float | None, window_s: float) -> float | None:
    if delta is None or window_s <= 0:
        return None
    return delta / window_s


def _max_of(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def window_delta(before: EngineMetrics, after: EngineMetrics, window_s: float,
                 seen: Sequence[EngineMetrics] = (), url: str | None = None, num_bad_lines: int | None = None,
                 num_missed_scrapes: int | None = None) -> ServerMetricsData:
    """The `server_metrics` data of docs/SNAPSHOT.md: gauges at the end (and their max over `seen`,
    the scrapes in between), counter deltas and rates, histogram deltas with interpolated quantiles."""
    all_scrapes = [before, *seen, after]
    resets: list[str] = []

    def delta(attr: str) -> float | None:
        d, reset = _counter_delta(getattr(before, attr), getattr(after, attr))
        if reset:
            resets.append(attr)
        return d

    preemptions = delta("num_preemptions_total")
    queries = delta("prefix_cache_queries_total")
    hits = delta("prefix_cache_hits_total")
    prompt = delta("prompt_tokens_total")
    generation = delta("generation_tokens_total")
    finished = delta("num_requests_finished_total")
    accepted = delta("spec_decode_accepted_tokens_total")
    drafted = delta("spec_decode_draft_tokens_total")

    if queries is not None and queries > 0 and hits is not None:
        hit_rate, hit_rate_source = hits / queries, "counters"
    elif queries is None and after.prefix_cache_hit_rate_gauge is not None:
        hit_rate, hit_rate_source = after.prefix_cache_hit_rate_gauge, "gauge"
    else:
        hit_rate, hit_rate_source = None, None

    if accepted is not None and drafted is not None and drafted > 0:
        acceptance = accepted / drafted
    else:
        acceptance = after.spec_decode_acceptance_rate_gauge

    histograms = Histograms(**{key: _histogram_summary(histogram_delta(before.histograms.get(key),
                                                                        after.histograms.get(key)))
                               for key in Histograms.names()})

    from triage.probes.topology_window import topology_window
    shape = topology_window(before.topology, after.topology, [m.topology for m in seen], window_s)
    return ServerMetricsData(
        **shape,
        engine=after.engine,
        model_name=after.model_name,
        window_s=window_s,
        num_scrapes=len(all_scrapes),
        kv_cache_usage_frac=after.kv_cache_usage_frac,
        kv_cache_usage_frac_max=_max_of(m.kv_cache_usage_frac for m in all_scrapes),
        num_requests_running=after.num_requests_running,
        num_requests_running_max=_max_of(m.num_requests_running for m in all_scrapes),
        num_requests_waiting=after.num_requests_waiting,
        num_requests_waiting_max=_max_of(m.num_requests_waiting for m in all_scrapes),
        num_requests_swapped=after.num_requests_swapped,
        num_preemptions_delta=preemptions,
        preemptions_per_s=_rate(preemptions, window_s),
        prefix_cache_queries_delta=queries,
        prefix_cache_hits_delta=hits,
        prefix_cache_hit_rate=hit_rate,
        prefix_cache_hit_rate_source=hit_rate_source,
        prompt_tokens_delta=prompt,
        generation_tokens_delta=generation,
        prompt_tokens_per_s=_rate(prompt, window_s),
        generation_tokens_per_s=_rate(generation, window_s),
        num_requests_finished_delta=finished,
        histograms=histograms,
        cache_config=dict(after.cache_config),
        kv_cache_capacity_tokens=after.kv_cache_capacity_tokens,
        spec_decode_accepted_tokens_delta=accepted,
        spec_decode_draft_tokens_delta=drafted,
        spec_decode_acceptance_rate=acceptance,
        spec_decode_mean_accept_length=after.spec_decode_mean_accept_length,
        counter_resets=tuple(resets),
        url=url,
        num_bad_lines=num_bad_lines,
        num_missed_scrapes=num_missed_scrapes,
    )
