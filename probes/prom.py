"""The one Prometheus text parser and normaliser, shared by `triage diagnose` and `triage bench`.

Each engine's names become one engine-neutral model (`EngineMetrics`) through that engine's metric map, declared
in its module (triage/engines/): for example
- vLLM V1: `vllm:*` with `model_name` and `engine` labels, `kv_cache_usage_perc` (older V1:
  `gpu_cache_usage_perc`), `prefix_cache_{queries,hits}_total`, `inter_token_latency_seconds`;
- vLLM V0: `vllm:gpu_cache_usage_perc`, `vllm:time_per_output_token_seconds`, no `engine` label;
- SGLang: `sglang:token_usage`, `num_running_reqs`, `num_queue_reqs`, `cache_hit_rate`, ...;
- TGI: `tgi_queue_size`, `tgi_batch_current_size`, `tgi_request_*` histograms.

Pure functions: text in, dataclasses out; the window over two scrapes is probes/metrics_window.py. `*_created` samples are creation timestamps of
counters, not values, and are dropped. A metric split over label sets (one per engine index, data
parallel rank ...) is summed; fractions are taken at their maximum instead.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from triage.engines import engines
from triage.engines import get as engine_by_name

# Labels that say *where* a value came from, not *what* it is: dropped from cache_config.
_ORIGIN_LABELS = frozenset({"model_name", "engine", "name", "pid", "tp_rank", "dp_rank", "pp_rank"})


@dataclass(frozen=True, slots=True)
class PromSample:
    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class MetricsSample:
    """One scrape: every sample except `*_created`, plus the declared type of each family."""

    samples: tuple[PromSample, ...] = ()
    types: Mapping[str, str] = field(default_factory=dict)
    num_bad_lines: int = 0

    def names(self) -> set[str]:
        return {s.name for s in self.samples}

    def series(self, name: str, **label_filter: str) -> list[PromSample]:
        return [s for s in self.samples if s.name == name
                and all(s.labels.get(k) == v for k, v in label_filter.items())]


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative buckets [(upper bound `le`, cumulative count)], sorted, `+Inf` last."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float


@dataclass(frozen=True, slots=True)
class EngineMetrics:
    """One scrape in engine-neutral terms. None means the engine does not export that value."""

    engine: str | None
    model_name: str | None = None
    kv_cache_usage_frac: float | None = None
    num_requests_running: float | None = None
    num_requests_waiting: float | None = None
    num_requests_swapped: float | None = None
    num_preemptions_total: float | None = None
    prefix_cache_queries_total: float | None = None
    prefix_cache_hits_total: float | None = None
    prefix_cache_hit_rate_gauge: float | None = None     # engines that only export a ratio (SGLang, V0)
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    num_requests_finished_total: float | None = None
    spec_decode_accepted_tokens_total: float | None = None
    spec_decode_draft_tokens_total: float | None = None
    spec_decode_num_drafts_total: float | None = None
    spec_decode_acceptance_rate_gauge: float | None = None
    spec_decode_mean_accept_length: float | None = None  # SGLang's spec_accept_length gauge
    kv_cache_capacity_tokens: float | None = None
    batch_occupancy_mean: float | None = None            # llama.cpp: busy slots per decode call
    histograms: Mapping[str, Histogram] = field(default_factory=dict)
    cache_config: Mapping[str, Any] = field(default_factory=dict)
    topology: Any = None                                 # probes/prom_topology.py's TopologyScrape


# ---------------------------------------------------------------------------------------------
# Parsing


# A sample value outside this range, NaN or infinite is "not measured": no engine counter comes near
# 1e15 (a quadrillion tokens), and a float beyond it has lost the integer precision a delta needs.
MAX_ABS_VALUE = 1e15


def _value(raw: object) -> float | None:
    try:
        value = float(raw)   # type: ignore[arg-type]
    except (OverflowError, ValueError, TypeError):
        return None
    return value if math.isfinite(value) and abs(value) <= MAX_ABS_VALUE else None


def _families(text: str) -> tuple[list[PromSample], dict[str, str], int]:
    """(samples, declared types, samples dropped for an unusable value)."""
    samples: list[PromSample] = []
    types: dict[str, str] = {}
    dropped = 0
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            value = _value(s.value)
            if value is None:
                dropped += 1
                continue
            samples.append(PromSample(s.name, dict(s.labels), value))
    return samples, types, dropped


_PARSE_ERRORS = (ValueError, TypeError, IndexError, KeyError, OverflowError, RecursionError)


def parse_metrics(text: str) -> MetricsSample:
    """Parse Prometheus text exposition. A malformed line, or a sample whose value is NaN, infinite or
    absurd, is skipped and counted in `num_bad_lines`, never fatal."""
    try:
        samples, types, dropped = _families(text)
        return MetricsSample(tuple(samples), types, dropped)
    except _PARSE_ERRORS:
        pass
    # Slow path: the text has bad lines. Keep every line that parses on its own.
    samples, types, bad = [], {}, 0
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            parts = stripped.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        try:
            more, _, dropped = _families(stripped + "\n")
            samples.extend(more)
            bad += dropped
        except _PARSE_ERRORS:
            bad += 1
    return MetricsSample(tuple(samples), types, bad)


# ---------------------------------------------------------------------------------------------
# Engine detection

def detect_engine(sample: MetricsSample) -> str | None:
    """The engine whose metric prefix the scrape carries ("vllm" V1 or "vllm-v0", "sglang", "tgi", "llama.cpp",
    "lmdeploy", "trtllm"), from the engine modules' metric maps; None when none matches."""
    names = sample.names()
    for engine in engines():
        m = engine.metrics
        if m is None or not any(n.startswith(m.prefix) for n in names):
            continue
        if m.variant_fn is not None:
            labels = {k for x in sample.samples if x.name.startswith(m.prefix) for k in x.labels}
            return m.variant_fn(names, labels)
        return engine.name
    return None


# ---------------------------------------------------------------------------------------------
# Normalisation


def _sum(sample: MetricsSample, names: Sequence[str], **labels: str) -> float | None:
    """The first name present, summed over its label sets; a sum beyond the sane range is not measured."""
    for name in names:
        series = sample.series(name, **labels)
        if series:
            return _value(sum(s.value for s in series))
    return None


def _max(sample: MetricsSample, names: Sequence[str]) -> float | None:
    for name in names:
        series = sample.series(name)
        if series:
            return float(max(s.value for s in series))
    return None


def _mean(sample: MetricsSample, names: Sequence[str]) -> float | None:
    for name in names:
        series = sample.series(name)
        if series:
            return float(sum(s.value for s in series) / len(series))
    return None


def _histogram(sample: MetricsSample, bases: Sequence[str], **labels: str) -> Histogram | None:
    """The first histogram base name present, its buckets summed per `le` over label sets."""
    for base in bases:
        bucket_series = sample.series(f"{base}_bucket", **labels)
        count = _sum(sample, [f"{base}_count"], **labels)
        if not bucket_series and count is None:
            continue
        per_le: dict[float, float] = {}
        for s in bucket_series:
            try:
                le = float(s.labels.get("le", "nan"))
            except ValueError:
                continue
            if math.isnan(le):
                continue
            per_le[le] = per_le.get(le, 0.0) + s.value
        total = _sum(sample, [f"{base}_sum"], **labels)
        buckets = tuple(sorted(per_le.items()))
        if count is None:
            count = buckets[-1][1] if buckets and math.isinf(buckets[-1][0]) else 0.0
        return Histogram(buckets=buckets, count=count, sum=total if total is not None else 0.0)
    return None


def _coerce(value: str) -> Any:
    low = value.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null", ""):
        return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _cache_config(sample: MetricsSample, name: str) -> dict[str, Any]:
    series = sample.series(name)
    if not series:
        return {}
    return {k: _coerce(v) for k, v in sorted(series[0].labels.items()) if k not in _ORIGIN_LABELS}


def _model_name(sample: MetricsSample, prefix: str) -> str | None:
    names = sorted({s.labels["model_name"] for s in sample.samples
                    if s.name.startswith(prefix) and s.labels.get("model_name")})
    if not names:
        return None
    return names[0] if len(names) == 1 else ", ".join(names)


class _Reader:
    """The scrape as the engines' metric maps read it (triage/engines/metrics.py)."""

    def __init__(self, sample: MetricsSample):
        self.sample = sample

    def sum(self, names: tuple[str, ...]) -> float | None:
        return _sum(self.sample, names)

    def max(self, names: tuple[str, ...]) -> float | None:
        return _max(self.sample, names)

    def mean(self, names: tuple[str, ...]) -> float | None:
        return _mean(self.sample, names)

    def hist_sum(self, base: str) -> float | None:
        h = _histogram(self.sample, [base])
        return h.sum if h is not None else None


def _present(hists: Mapping[str, Histogram | None]) -> dict[str, Histogram]:
    return {k: h for k, h in hists.items() if h is not None}


def normalise(sample: MetricsSample) -> EngineMetrics:
    """The scrape in engine-neutral terms, through the engine's own metric map; an unknown exposition gives an
    all-None EngineMetrics."""
    label = detect_engine(sample)
    module = engine_by_name(label)
    if module is None or module.metrics is None:
        return EngineMetrics(engine=None)
    m = module.metrics
    values = m.read(_Reader(sample))
    hists = {key: _histogram(sample, list(bases)) for key, bases in m.histograms.items()}
    from triage.probes.prom_topology import read_topology
    return EngineMetrics(
        engine=label, model_name=_model_name(sample, m.prefix) if m.model_label else None, **values,
        histograms=_present(hists), cache_config=_cache_config(sample, m.cache_config) if m.cache_config else {},
        topology=read_topology(sample, module.topology))
